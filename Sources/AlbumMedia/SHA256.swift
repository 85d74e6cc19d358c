import CCrypto

/// SHA-256 through libcrypto's EVP interface (SHA-NI where the CPU has it).
final class SHA256 {
    private let context: OpaquePointer

    init() {
        context = EVP_MD_CTX_new()
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    /// The digest as 64 lowercase hex digits.
    func finish() -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(Int(length) * 2)
        for byte in digest.prefix(Int(length)) {
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

extension FileInput {
    /// The size of each pread while hashing.
    static let hashChunk = 1 << 20

    /// Hashes the file from 0 to `size` in 1 MiB preads and keeps the first
    /// chunk as the prefix the metadata readers start from. Returns the hex
    /// digest and the number of bytes hashed (less than `size` only if the
    /// file shrank meanwhile).
    mutating func hashAll(keepingPrefix: Bool) throws(MediaReadError) -> (sha256: String, count: Int64) {
        let hasher = SHA256()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.hashChunk, alignment: 4096)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while offset < size {
            let want = Int(min(Int64(Self.hashChunk), size - offset))
            let got = try readFully(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: offset)
            if got == 0 { break }
            let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<got])
            hasher.update(chunk)
            if keepingPrefix && offset == 0 { keepPrefix(Array(chunk)) }
            offset += Int64(got)
            if got < want { break }
        }
        return (hasher.finish(), offset)
    }
}
