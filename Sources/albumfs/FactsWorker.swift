import AlbumCore
import AlbumMedia
import Glibc

/// The media readers in a process of their own: `albumfs read-facts` (not
/// for users) reads one path per line on stdin and answers one line of
/// facts on stdout. The daemon keeps one such worker (IsolatedFactsReader),
/// so a C library that aborts or hangs on a hostile file (libheif asserts on
/// some broken files) takes down the worker, never the mount.
enum FactsWorker {
    /// The answer line: the facts' fields, tab-separated and escaped; `!N` for errno N.
    static func encode(_ f: AssetFacts) -> String {
        let fields: [String?] = [f.sha256, f.type, f.kind.rawValue, f.captured, f.width.map(String.init),
                                 f.height.map(String.init), f.duration.map { String($0) }, f.location,
                                 f.contentIdentifier, f.isScreenshot ? "1" : "0", f.isRaw ? "1" : "0"]
        return fields.map { ($0 ?? "").map(escape).joined() }.joined(separator: "\t")
    }

    static func decode(_ line: String) -> AssetFacts? {
        let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map { unescape(String($0)) }
        guard fields.count == 11, fields[0].utf8.count == 64 else { return nil }
        func optional(_ i: Int) -> String? { fields[i].isEmpty ? nil : fields[i] }
        return AssetFacts(sha256: fields[0], type: optional(1), kind: AssetFacts.Kind(rawValue: fields[2]) ?? .other,
                          captured: optional(3), width: optional(4).flatMap { Int($0) }, height: optional(5).flatMap { Int($0) },
                          duration: optional(6).flatMap { Double($0) }, location: optional(7), contentIdentifier: optional(8),
                          isScreenshot: fields[9] == "1", isRaw: fields[10] == "1")
    }

    private static func escape(_ c: Character) -> String {
        switch c {
        case "%": return "%25"
        case "\t": return "%09"
        case "\n": return "%0A"
        case "\r": return "%0D"
        default: return String(c)
        }
    }

    private static func unescape(_ s: String) -> String {
        s.replacingOccurrences("%09", "\t").replacingOccurrences("%0A", "\n").replacingOccurrences("%0D", "\r")
            .replacingOccurrences("%25", "%")
    }

    /// `albumfs read-facts`: serves until stdin closes.
    static func serve() -> Int32 {
        var lines = LineReader(descriptor: STDIN_FILENO)
        while let path = lines.next() {
            let answer: String
            do {
                answer = encode(try MediaFactsReader().facts(ofPath: path))
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
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = read(descriptor, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return nil }
            buffer += chunk[..<count]
        }
    }
}

private extension String {
    func replacingOccurrences(_ target: String, _ replacement: String) -> String {
        guard contains(target) else { return self }
        return split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
