import Digests

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
