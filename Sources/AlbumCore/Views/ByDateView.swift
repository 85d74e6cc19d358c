import SQLiteKit

/// `By Date/YYYY/YYYY-MM/`: every live asset under the month of its capture
/// date as written in the file, else of its modification time (the month is
/// worked out when its facts are read). Only years and months that have
/// assets show; each is found by index seeks, not a scan.
struct ByDateView: ComputedView {
    let directory = ViewDirectory(FixedNode.byDate, .computedView, in: FixedNode.root, "By Date")
    private static let source = ViewQueries.byMonth

    /// Its name in the asset's month, the month's in its year, the year's in By Date.
    func names(of asset: NodeID, rollName: Name, place: ViewPlacement?, _ db: Database) throws -> [ChangeSet.EntryName] {
        guard let place, let monthNode = VirtualNode.month(named: Array(place.month.utf8)),
              case .month(let year, _) = monthNode else { return [] }
        return [ChangeSet.EntryName(directory: monthNode.id, name: rollName),
                ChangeSet.EntryName(directory: VirtualNode.year(year).id, name: monthNode.name),
                ChangeSet.EntryName(directory: FixedNode.byDate, name: VirtualNode.year(year).name)]
    }

    func serves(_ id: NodeID) -> Bool {
        if id == FixedNode.byDate { return true }
        switch VirtualNode(id) {
        case .year, .month: return true
        default: return false
        }
    }

    func lookup(_ db: Database, in directory: NodeID, _ name: Name) throws -> ViewChild? {
        if directory == FixedNode.byDate {
            guard let year = VirtualNode.year(named: name), try exists(db, year) else { return nil }
            return .directory(year)
        }
        switch VirtualNode(directory) {
        case .year(let year):
            guard let month = VirtualNode.month(named: name, inYear: year), try exists(db, month) else { return nil }
            return .directory(month)
        case .month:
            return try asset(db, Self.source, key: .text(Self.key(directory)), named: name)
        default:
            return nil
        }
    }

    func list(_ db: Database, _ directory: NodeID, after cookie: Int64, limit: Int) throws -> [ViewEntry] {
        let months: [String]
        if directory == FixedNode.byDate {
            // One entry per year: the cookie is the year.
            var years: [ViewEntry] = []
            var from = cookie > 0 ? Self.digits(Int(cookie) + 1) : "0000"
            while years.count < limit, let month = try db.firstLiveMonth(from: from, to: "9999-99") {
                guard let year = Int(month.prefix(4)) else { break }
                let node = VirtualNode.year(year)
                years.append(ViewEntry(cookie: Int64(year), name: node.name, child: .directory(node)))
                from = Self.digits(year + 1)
            }
            return years
        }
        switch VirtualNode(directory) {
        case .year(let year):
            // The cookie is the month.
            months = try db.liveMonths(from: cookie > 0 ? "\(Self.digits(year))-\(Self.two(Int(cookie) + 1))" : "\(Self.digits(year))-",
                                       to: "\(Self.digits(year))-99", limit: limit)
            return months.compactMap { month in
                guard let node = VirtualNode.month(named: Array(month.utf8), inYear: year),
                      case .month(_, let m) = node else { return nil }
                return ViewEntry(cookie: Int64(m), name: node.name, child: .directory(node))
            }
        case .month:
            return try assets(db, Self.source, key: .text(Self.key(directory)), after: cookie, limit: limit)
        default:
            return []
        }
    }

    func exists(_ db: Database, _ node: VirtualNode) throws -> Bool {
        switch node {
        case .year(let year): return try db.firstLiveMonth(from: "\(Self.digits(year))-", to: "\(Self.digits(year))-99") != nil
        case .month: return try db.firstLiveMonth(from: Self.key(node.id), to: Self.key(node.id) + "~") != nil
        default: return false
        }
    }

    /// A month directory's key in asset_facts: its name, `YYYY-MM`.
    private static func key(_ id: NodeID) -> String {
        String(decoding: VirtualNode(id)?.name ?? [], as: UTF8.self)
    }

    private static func digits(_ year: Int) -> String {
        let text = String(year)
        return String(repeating: "0", count: max(0, 4 - text.count)) + text
    }

    private static func two(_ month: Int) -> String { month < 10 ? "0\(month)" : "\(month)" }
}
