/// Bounds-checked reads of big- and little-endian integers from a byte array:
/// every accessor returns nil rather than trapping when the bytes run out,
/// so a truncated or lying file can only yield fewer facts.
struct Bytes {
    let storage: [UInt8]
    var bigEndian: Bool = true

    init(_ storage: [UInt8], bigEndian: Bool = true) {
        self.storage = storage
        self.bigEndian = bigEndian
    }

    var count: Int { storage.count }

    func u8(_ at: Int) -> UInt8? {
        at >= 0 && at < storage.count ? storage[at] : nil
    }

    func u16(_ at: Int) -> UInt16? {
        guard at >= 0, at <= storage.count - 2 else { return nil }
        let a = UInt16(storage[at]), b = UInt16(storage[at + 1])
        return bigEndian ? a << 8 | b : b << 8 | a
    }

    func u32(_ at: Int) -> UInt32? {
        guard let hi = u16(at), let lo = u16(at + 2) else { return nil }
        return bigEndian ? UInt32(hi) << 16 | UInt32(lo) : UInt32(lo) << 16 | UInt32(hi)
    }

    func u64(_ at: Int) -> UInt64? {
        guard let hi = u32(at), let lo = u32(at + 4) else { return nil }
        return bigEndian ? UInt64(hi) << 32 | UInt64(lo) : UInt64(lo) << 32 | UInt64(hi)
    }

    /// `count` bytes from `at`, or nil when they are not all there.
    func slice(_ at: Int, _ count: Int) -> ArraySlice<UInt8>? {
        guard at >= 0, count >= 0, at <= storage.count, count <= storage.count - at else { return nil }
        return storage[at..<at + count]
    }

    /// Four bytes as a box or chunk type ("moov", "IHDR", "\u{A9}xyz"), byte
    /// for byte (Latin-1), so that no two types read alike.
    func fourCC(_ at: Int) -> String? {
        slice(at, 4).map { bytes in
            var text = ""
            for byte in bytes { text.unicodeScalars.append(Unicode.Scalar(byte)) }
            return text
        }
    }

    func starts(with prefix: [UInt8], at: Int = 0) -> Bool {
        guard let part = slice(at, prefix.count) else { return false }
        return part.elementsEqual(prefix)
    }
}

extension Collection<UInt8> {
    /// Text from bytes: UTF-8 up to the first NUL, surrounding blanks trimmed;
    /// nil when nothing is left.
    func trimmedText() -> String? {
        let upToNul = prefix { $0 != 0 }
        let text = String(decoding: upToNul, as: UTF8.self)
        let trimmed = text.drop { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
            .reversed().drop { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }.reversed()
        let result = String(trimmed)
        return result.isEmpty ? nil : result
    }
}
