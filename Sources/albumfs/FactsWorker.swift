import AlbumCore
import AlbumMedia
import Glibc

/// The media readers in a process of their own: `albumfs read-facts` (not
/// for users) reads one path per line on stdin and answers one line on
/// stdout: the facts (`AssetFacts.line`), or `!N` for errno N. The daemon keeps one such worker (IsolatedFactsReader),
/// so a C library that aborts or hangs on a hostile file (libheif asserts on
/// some broken files) takes down the worker, never the mount.
enum FactsWorker {
    /// `albumfs read-facts`: serves until stdin closes.
    static func serve() -> Int32 {
        var lines = LineReader(descriptor: STDIN_FILENO)
        while let path = lines.next() {
            let answer: String
            do {
                answer = try MediaFactsReader().factsAndThumbnail(ofPath: path).line
            } catch let error as MediaReadError {
                answer = "!\(error.code)"
            } catch {
                answer = "!\(EIO)"
            }
            guard writeAll(STDOUT_FILENO, answer + "\n") else { return 1 }
        }
        return 0
    }

    static func writeAll(_ descriptor: Int32, _ text: String) -> Bool {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 && errno == ENOTSOCK {
                let plain = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                guard plain > 0 else { return false }
                bytes = bytes.dropFirst(plain)
                continue
            }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return false }
            bytes = bytes.dropFirst(written)
        }
        return true
    }
}

/// Lines from a descriptor (no stdio: nothing shared between threads).
struct LineReader {
    let descriptor: Int32
    private var buffer: [UInt8] = []

    init(descriptor: Int32) { self.descriptor = descriptor }

    /// The next line without its newline; nil at end of input or on an error.
    /// `timeout` (ms, -1: none) bounds the wait for each read.
    mutating func next(timeout: Int32 = -1) -> String? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let polled = poll(&ready, 1, timeout)
            if polled < 0 && errno == EINTR { continue }
            guard polled > 0 else { return nil }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = read(descriptor, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return nil }
            buffer += chunk[..<count]
        }
    }
}
