#if canImport(Glibc)
import Glibc
#endif
import Digests

/// What the library knows of an object in the bucket, to check what comes
/// back from it: the SHA-256 of the whole (its name), and the SHA-256 of
/// every `chunkSize` bytes of it, so that a read can be served from the
/// chunks that have come and been checked, before the rest has
/// (SEMANTICS.md § Remote storage).
struct ObjectDigest: Equatable, Sendable {
    /// 4 MiB: a photo is one or two chunks; the first byte of a 1 GiB video
    /// waits for one 4 MiB ranged GET, not for the whole object.
    static let chunkSize: Int64 = 4 << 20

    let sha256: String
    let size: Int64
    /// The chunks' digests, 32 bytes each, in order; nil for an object
    /// recorded without them (then only the whole is checked, once it came).
    let chunks: [UInt8]?

    var chunkCount: Int { Int((size + Self.chunkSize - 1) / Self.chunkSize) }

    /// Chunk `index`'s bytes in the object.
    func range(ofChunk index: Int) -> Range<Int64> {
        let start = Int64(index) * Self.chunkSize
        return start..<min(start + Self.chunkSize, size)
    }

    /// Chunk `index`'s SHA-256, if recorded.
    func digest(ofChunk index: Int) -> ArraySlice<UInt8>? {
        guard index < chunkCount, let chunks, chunks.count == chunkCount * 32 else { return nil }
        return chunks[(index * 32)..<(index * 32 + 32)]
    }

    /// Reads the first `length` bytes at `descriptor` (pread, 1 MiB at a
    /// time) into the digest of the whole and of each chunk, in one pass.
    static func of(_ descriptor: Int32, length: Int64) throws(LibraryError) -> ObjectDigest {
        let whole = SHA256()
        var chunk = SHA256()
        var chunks: [UInt8] = []
        chunks.reserveCapacity(Int((length + chunkSize - 1) / chunkSize) * 32)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while offset < length {
            // A piece never straddles a chunk's end.
            let chunkEnd = (offset / chunkSize + 1) * chunkSize
            let want = Int(min(Int64(buffer.count), length - offset, chunkEnd - offset))
            let got = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, want, off_t(offset)) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else {
                throw got < 0 ? LibraryError(errno: errno) : .inconsistent("the data is shorter than its size while it is read for upload")
            }
            buffer.withUnsafeBytes { piece in
                let read = UnsafeRawBufferPointer(rebasing: piece[0..<got])
                whole.update(read)
                chunk.update(read)
            }
            offset += Int64(got)
            if offset % chunkSize == 0 || offset == length {
                chunks += chunk.finishBytes()
                chunk = SHA256()
            }
        }
        return ObjectDigest(sha256: whole.finish(), size: length, chunks: chunks)
    }
}
