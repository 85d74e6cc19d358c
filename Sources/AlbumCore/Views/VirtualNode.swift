/// The directories of computed views that are not nodes of the store: By
/// Date's years and months and the duplicate sets. Their ids are computed
/// from what they show, so the same directory has the same `st_ino` for as
/// long as it exists, and no row is written when one appears or goes.
///
/// Layout: the two top bits set (store ids are SQLite row ids, far below),
/// an 8-bit tag, a 48-bit key.
enum VirtualNode: Hashable, Sendable {
    /// `By Date/YYYY`.
    case year(Int)
    /// `By Date/YYYY/YYYY-MM`.
    case month(year: Int, month: Int)
    /// `Smart Albums/Duplicates/H`: H the first 12 hex digits of the set's SHA-256.
    case duplicateSet(prefix: UInt64)

    private static let marker: NodeID = 0b11 << 62
    private static let keyBits: NodeID = 48
    private static let keyMask: NodeID = (1 << keyBits) - 1

    init?(_ id: NodeID) {
        guard id & Self.marker == Self.marker else { return nil }
        let key = id & Self.keyMask
        switch (id >> Self.keyBits) & 0xff {
        case 1 where key <= 9999: self = .year(Int(key))
        case 2 where key <= 9999_12 && key % 100 >= 1 && key % 100 <= 12:
            self = .month(year: Int(key / 100), month: Int(key % 100))
        case 3: self = .duplicateSet(prefix: key)
        default: return nil
        }
    }

    var id: NodeID {
        let (tag, key): (NodeID, NodeID)
        switch self {
        case .year(let year): (tag, key) = (1, NodeID(year))
        case .month(let year, let month): (tag, key) = (2, NodeID(year * 100 + month))
        case .duplicateSet(let prefix): (tag, key) = (3, prefix & Self.keyMask)
        }
        return Self.marker | tag << Self.keyBits | key
    }

    /// Its name in its parent directory.
    var name: Name {
        switch self {
        case .year(let year): return Array(Self.digits(year, 4).utf8)
        case .month(let year, let month): return Array("\(Self.digits(year, 4))-\(Self.digits(month, 2))".utf8)
        case .duplicateSet(let prefix): return Array(Self.hex(prefix).utf8)
        }
    }

    /// The directory that holds it.
    var parent: NodeID {
        switch self {
        case .year: return FixedNode.byDate
        case .month(let year, _): return VirtualNode.year(year).id
        case .duplicateSet: return FixedNode.duplicates
        }
    }

    /// The month a `YYYY-MM` name (in year `year`, if given) or a store's month key stands for.
    static func month(named name: Name, inYear year: Int? = nil) -> VirtualNode? {
        guard name.count == 7, name[4] == UInt8(ascii: "-"),
              let y = Int(String(decoding: name[0..<4], as: UTF8.self)),
              let m = Int(String(decoding: name[5..<7], as: UTF8.self)),
              (1...12).contains(m), year == nil || year == y,
              name.allSatisfy({ $0 == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
        else { return nil }
        return .month(year: y, month: m)
    }

    static func year(named name: Name) -> VirtualNode? {
        guard name.count == 4, name.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              let y = Int(String(decoding: name, as: UTF8.self)) else { return nil }
        return .year(y)
    }

    static func duplicateSet(named name: Name) -> VirtualNode? {
        guard name.count == 12, let prefix = UInt64(String(decoding: name, as: UTF8.self), radix: 16),
              name.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) })
        else { return nil }
        return .duplicateSet(prefix: prefix)
    }

    static func hex(_ prefix: UInt64) -> String {
        let digits = String(prefix, radix: 16)
        return String(repeating: "0", count: max(0, 12 - digits.count)) + digits
    }

    private static func digits(_ value: Int, _ count: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, count - text.count)) + text
    }
}
