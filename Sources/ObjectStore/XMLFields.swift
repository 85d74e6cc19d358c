/// The few fields albumfs reads from S3's XML answers (a listing's keys,
/// sizes and ETags, an error's code and message). S3's XML is flat and
/// machine-written; a full parser buys nothing here, and libxml2 would be
/// one more library for a handful of tags. Entities are unescaped.
enum XMLFields {
    /// The text of every `<tag>…</tag>` in `xml`, in order.
    static func values(_ tag: String, in xml: Substring) -> [String] {
        elements(tag, in: xml).map { unescape($0) }
    }

    static func value(_ tag: String, in xml: Substring) -> String? { values(tag, in: xml).first }

    /// The inner text of every `<tag>…</tag>`, raw.
    static func elements(_ tag: String, in xml: Substring) -> [Substring] {
        let open = "<\(tag)>", close = "</\(tag)>"
        var found: [Substring] = []
        var rest = xml[...]
        while let start = rest.firstRange(of: open) {
            let inner = rest[start.upperBound...]
            guard let end = inner.firstRange(of: close) else { break }
            found.append(inner[..<end.lowerBound])
            rest = inner[end.upperBound...]
        }
        return found
    }

    static func unescape(_ text: Substring) -> String {
        guard text.contains("&") else { return String(text) }
        var out = ""
        var rest = text
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            let after = rest[amp...]
            guard let semi = after.firstIndex(of: ";") else { out += after; return out }
            let entity = after[after.index(after: amp)..<semi]
            switch entity {
            case "amp": out += "&"
            case "lt": out += "<"
            case "gt": out += ">"
            case "quot": out += "\""
            case "apos": out += "'"
            default:
                if entity.hasPrefix("#x"), let code = UInt32(entity.dropFirst(2), radix: 16), let scalar = UnicodeScalar(code) {
                    out.unicodeScalars.append(scalar)
                } else if entity.hasPrefix("#"), let code = UInt32(entity.dropFirst()), let scalar = UnicodeScalar(code) {
                    out.unicodeScalars.append(scalar)
                } else {
                    out += after[...semi]
                }
            }
            rest = after[after.index(after: semi)...]
        }
        return out + rest
    }
}
