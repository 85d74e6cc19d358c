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
        return fields.map { escape($0 ?? "") }.joined(separator: "\t")
    }

    static func decode(_ line: String) -> AssetFacts? {
        let fields = line.utf8.split(separator: UInt8(ascii: "\t"), omittingEmptySubsequences: false).map(unescape)
        guard fields.count == 11, fields[0].utf8.count == 64 else { return nil }
        func optional(_ i: Int) -> String? { fields[i].isEmpty ? nil : fields[i] }
        return AssetFacts(sha256: fields[0], type: optional(1), kind: AssetFacts.Kind(rawValue: fields[2]) ?? .other,
                          captured: optional(3), width: optional(4).flatMap { Int($0) }, height: optional(5).flatMap { Int($0) },
                          duration: optional(6).flatMap { Double($0) }, location: optional(7), contentIdentifier: optional(8),
                          isScreenshot: fields[9] == "1", isRaw: fields[10] == "1")
    }

    /// The four bytes a field cannot hold as they are, and their escapes.
    private static let escapes: [(byte: UInt8, code: (UInt8, UInt8))] = [
        (UInt8(ascii: "%"), (UInt8(ascii: "2"), UInt8(ascii: "5"))), (UInt8(ascii: "\t"), (UInt8(ascii: "0"), UInt8(ascii: "9"))),
        (UInt8(ascii: "\n"), (UInt8(ascii: "0"), UInt8(ascii: "A"))), (UInt8(ascii: "\r"), (UInt8(ascii: "0"), UInt8(ascii: "D"))),
    ]

    private static func escape(_ field: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(field.utf8.count)
        for byte in field.utf8 {
            if let e = escapes.first(where: { $0.byte == byte }) {
                bytes += [UInt8(ascii: "%"), e.code.0, e.code.1]
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Undoes `escape` in one pass over the bytes (a field with no `%`, nearly
    /// all of them, is taken as it is). The daemon decodes one line a photo:
    /// four chained `replacingOccurrences` of each field were 3 % of its CPU
    /// during a `cp -r` of photos (`perf`).
    private static func unescape(_ field: Substring.UTF8View) -> String {
        guard field.contains(UInt8(ascii: "%")) else { return String(decoding: field, as: UTF8.self) }
        let bytes = Array(field)
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count,
               let e = escapes.first(where: { $0.code == (bytes[i + 1], bytes[i + 2]) }) {
                decoded.append(e.byte)
                i += 3
            } else {
                decoded.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: decoded, as: UTF8.self)
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
