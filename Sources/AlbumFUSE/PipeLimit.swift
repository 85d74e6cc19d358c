import Glibc

/// The largest pipe an unprivileged process may ask for (fs.pipe-max-size).
enum PipeLimit {
    static var current: Int? {
        let fd = open("/proc/sys/fs/pipe-max-size", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = read(fd, &buffer, buffer.count)
        guard n > 0 else { return nil }
        return Int(String(decoding: buffer[..<n].filter { $0 >= 0x30 && $0 <= 0x39 }, as: UTF8.self))
    }
}
