/// A directory-entry name: raw bytes, never normalised or case-folded, because
/// invalid UTF-8 must round-trip byte for byte.
public typealias Name = [UInt8]

public enum Names {
    /// Linux's NAME_MAX.
    public static let maxLength = 255

    /// Checks that `name` can be stored: 1…255 bytes, no `/` or NUL, not `.`/`..`.
    public static func validate(_ name: Name) throws(LibraryError) {
        if name.count > maxLength { throw .nameTooLong }
        if name.isEmpty || name == [0x2e] || name == [0x2e, 0x2e] { throw .invalidArgument }
        if name.contains(0x2f) || name.contains(0) { throw .invalidArgument }
    }

    /// Names programs give the files they write next to what they work on
    /// (SEMANTICS.md § Files that are not photos: side files): a file created
    /// under such a name belongs to its directory and never becomes an asset.
    /// `.x` (dot files: .DS_Store, ._x, .x.swp, .goutputstream-*, rsync's
    /// .x.XXXXXX), `Thumbs.db`, `desktop.ini`, `~$x`, `x.part`, `x.crdownload`.
    public static func isSideFileName(_ name: Name) -> Bool {
        if name.first == 0x2e { return true }
        if name == thumbsDB || name == desktopINI { return true }
        if name.starts(with: [0x7e, 0x24]) { return true }
        return name.count > partSuffix.count && name.suffix(partSuffix.count).elementsEqual(partSuffix)
            || name.count > crdownloadSuffix.count && name.suffix(crdownloadSuffix.count).elementsEqual(crdownloadSuffix)
    }
    private static let thumbsDB: Name = Array("Thumbs.db".utf8)
    private static let desktopINI: Name = Array("desktop.ini".utf8)
    private static let partSuffix: Name = Array(".part".utf8)
    private static let crdownloadSuffix: Name = Array(".crdownload".utf8)

    /// The extension starts at the last `.` that is not the first byte.
    static func splitExtension(_ name: Name) -> (stem: ArraySlice<UInt8>, ext: ArraySlice<UInt8>) {
        if let dot = name.lastIndex(of: 0x2e), dot > 0 {
            return (name[..<dot], name[dot...])
        }
        return (name[...], [])
    }

    /// The `(n)` form of `name`: `IMG_1.JPG` → `IMG_1 (2).JPG`, `a.tar.gz` → `a.tar (2).gz`,
    /// `.hidden` → `.hidden (2)`. When the result would pass 255 bytes the stem is
    /// shortened at a UTF-8 character boundary (or anywhere where it is not UTF-8).
    public static func numbered(_ name: Name, _ n: Int) -> Name {
        let counter = Array(" (\(n))".utf8)
        var (stem, ext) = splitExtension(name)
        // An extension so long that no stem fits beside it is treated as part
        // of the stem: the name stays within 255 bytes and unique per n.
        if maxLength - counter.count - ext.count < 1 {
            (stem, ext) = (name[...], [])
        }
        let room = maxLength - counter.count - ext.count
        var stemBytes = Array(stem)
        if stemBytes.count > room {
            stemBytes = truncate(stemBytes, toAtMost: room)
        }
        return stemBytes + counter + Array(ext)
    }

    /// Whether `candidate` is `base` itself or one of its `(n)` forms (n ≥ 2, no leading zeros).
    public static func isSameOrNumbered(_ candidate: Name, of base: Name) -> Bool {
        if candidate == base { return true }
        // Every " (digits)" in the candidate proposes an n; the form is checked whole.
        var index = candidate.startIndex
        while let open = candidate[index...].firstIndex(of: 0x28) {
            index = open + 1
            guard open > 0, candidate[open - 1] == 0x20,
                  let close = candidate[index...].firstIndex(of: 0x29) else { continue }
            let digits = candidate[index..<close]
            guard let first = digits.first, first != 0x30, digits.count <= 9,
                  digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { continue }
            let n = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            if n >= 2 && numbered(base, n) == candidate { return true }
        }
        return false
    }

    /// Cuts `bytes` to at most `limit` bytes without splitting a valid UTF-8
    /// sequence; where the bytes at the cut are not valid UTF-8, cuts at the byte.
    static func truncate(_ bytes: [UInt8], toAtMost limit: Int) -> [UInt8] {
        guard bytes.count > limit else { return bytes }
        var lead = limit
        while lead > 0, limit - lead < 3, bytes[lead] & 0xC0 == 0x80 { lead -= 1 }
        if lead < limit, let length = sequenceLength(lead: bytes[lead]),
           lead + length > limit, lead + length <= bytes.count,
           bytes[(lead + 1)..<(lead + length)].allSatisfy({ $0 & 0xC0 == 0x80 }) {
            return Array(bytes[..<lead])
        }
        return Array(bytes[..<limit])
    }

    private static func sequenceLength(lead: UInt8) -> Int? {
        switch lead {
        case 0xC2...0xDF: return 2
        case 0xE0...0xEF: return 3
        case 0xF0...0xF4: return 4
        default: return nil
        }
    }
}
