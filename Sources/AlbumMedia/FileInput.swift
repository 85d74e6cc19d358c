#if canImport(Glibc)
import Glibc
#endif

/// Runs a call that returns -1 on failure, retrying EINTR, and throws errno.
@discardableResult
func syscall<T: FixedWidthInteger>(_ operation: String, _ call: () -> T) throws(MediaReadError) -> T {
    while true {
        let result = call()
        if result != -1 { return result }
        let code = errno
        if code == EINTR { continue }
        throw MediaReadError(code: code, operation: operation)
    }
}

/// A regular file read with pread only: the descriptor's offset is never
/// moved. `size` is fixed when the input is made; reads past it return
/// nothing, so a file that grows while it is read cannot make a reader loop.
/// The first bytes, once read, are kept (`prefix`) and served from memory.
struct FileInput {
    let fd: Int32
    let size: Int64
    private(set) var prefix: [UInt8] = []

    init(fileDescriptor fd: Int32) throws(MediaReadError) {
        var status = stat()
        try syscall("fstat") { fstat(fd, &status) }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw MediaReadError(code: EINVAL, operation: "not a regular file")
        }
        self.fd = fd
        self.size = Int64(status.st_size)
    }

    /// Keeps `bytes` as the file's first bytes (the hash pass reads them anyway).
    mutating func keepPrefix(_ bytes: [UInt8]) { prefix = bytes }

    /// Up to `count` bytes at `offset`: fewer at the end of the file (or if it
    /// shrank), none past it.
    func read(at offset: Int64, count: Int) throws(MediaReadError) -> [UInt8] {
        guard offset >= 0, offset < size, count > 0 else { return [] }
        let wanted = Int(min(Int64(count), size - offset))
        if offset + Int64(wanted) <= Int64(prefix.count) {
            let start = Int(offset)
            return Array(prefix[start..<start + wanted])
        }
        var bytes = [UInt8](repeating: 0, count: wanted)
        var failure: MediaReadError?
        let got = bytes.withUnsafeMutableBytes { buffer in
            do throws(MediaReadError) {
                return try readFully(into: buffer, at: offset)
            } catch {
                failure = error
                return 0
            }
        }
        if let failure { throw failure }
        if got < wanted { bytes.removeSubrange(got...) }
        return bytes
    }

    /// Fills `buffer` from `offset` with as many preads as it takes; stops
    /// early only at the end of the file.
    func readFully(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(MediaReadError) -> Int {
        var done = 0
        while done < buffer.count {
            let n = try syscall("pread") {
                pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + Int64(done)))
            }
            if n == 0 { break }
            done += n
        }
        return done
    }
}
