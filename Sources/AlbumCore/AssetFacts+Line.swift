/// An asset's facts as one line of text: how the facts worker (`albumfs
/// read-facts`, a process of its own) answers the daemon. Twelve fields,
/// tab-separated, each escaped so that it holds no tab, line feed or carriage
/// return (`%09`, `%0A`, `%0D`, and `%25` for `%`); the last is the
/// thumbnail's PNG in hex (empty: none).
extension AssetFacts {
    public var line: String {
        let fields: [String?] = [sha256, type, kind.rawValue, captured, width.map(String.init),
                                 height.map(String.init), duration.map { String($0) }, location,
                                 contentIdentifier, isScreenshot ? "1" : "0", isRaw ? "1" : "0"]
        return fields.map { FactsLine.escape($0 ?? "") }.joined(separator: "\t") + "\t" + FactsLine.hex(thumbnail ?? [])
    }

    /// The facts a `line` says; nil if it is not one.
    public init?(line: String) {
        let raw = line.utf8.split(separator: UInt8(ascii: "\t"), omittingEmptySubsequences: false)
        guard raw.count == 12, let thumbnail = FactsLine.bytes(hex: raw[11]) else { return nil }
        let fields = raw.prefix(11).map(FactsLine.unescape)
        guard fields[0].utf8.count == 64 else { return nil }
        func optional(_ i: Int) -> String? { fields[i].isEmpty ? nil : fields[i] }
        self.init(sha256: fields[0], type: optional(1), kind: Kind(rawValue: fields[2]) ?? .other,
                  captured: optional(3), width: optional(4).flatMap { Int($0) }, height: optional(5).flatMap { Int($0) },
                  duration: optional(6).flatMap { Double($0) }, location: optional(7), contentIdentifier: optional(8),
                  isScreenshot: fields[9] == "1", isRaw: fields[10] == "1", thumbnail: thumbnail.isEmpty ? nil : thumbnail)
    }
}

/// The escaping of a facts line's fields, byte by byte (a CRLF is one
/// Character in Swift, two bytes to escape).
enum FactsLine {
    /// The four bytes a field cannot hold as they are, and their escapes.
    private static let escapes: [(byte: UInt8, code: (UInt8, UInt8))] = [
        (UInt8(ascii: "%"), (UInt8(ascii: "2"), UInt8(ascii: "5"))), (UInt8(ascii: "\t"), (UInt8(ascii: "0"), UInt8(ascii: "9"))),
        (UInt8(ascii: "\n"), (UInt8(ascii: "0"), UInt8(ascii: "A"))), (UInt8(ascii: "\r"), (UInt8(ascii: "0"), UInt8(ascii: "D"))),
    ]

    private static let digits = Array("0123456789abcdef".utf8)

    static func hex(_ bytes: [UInt8]) -> String {
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 15)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes of lowercase hex text; nil if it is not that.
    static func bytes(hex text: Substring.UTF8View) -> [UInt8]? {
        guard text.count % 2 == 0 else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            default: return nil
            }
        }
        var bytes = [UInt8]()
        bytes.reserveCapacity(text.count / 2)
        var high: UInt8?
        for c in text {
            guard let v = value(c) else { return nil }
            if let h = high {
                bytes.append(h << 4 | v)
                high = nil
            } else {
                high = v
            }
        }
        return bytes
    }

    static func escape(_ field: String) -> String {
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

    /// Undoes `escape` in one pass (a field with no `%`, nearly all of them,
    /// is taken as it is). The daemon decodes one line a photo: four chained
    /// `replacingOccurrences` of each field were 3 % of its CPU during a
    /// `cp -r` of photos (`perf`).
    static func unescape(_ field: Substring.UTF8View) -> String {
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
}
