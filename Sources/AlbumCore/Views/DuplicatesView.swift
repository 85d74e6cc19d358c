import SQLiteKit

/// `Smart Albums/Duplicates/H/`: one directory per set of two or more live
/// assets with the same SHA-256, named by its first 12 hex digits.
struct DuplicatesView: ComputedView {
    let directory = ViewDirectory(FixedNode.duplicates, .computedView, in: FixedNode.smartAlbums, "Duplicates")
    private static let source = ViewQueries.duplicateSet

    /// Its name in the set of its SHA-256 and the set's in Duplicates (the
    /// set it was in, whether or not it still is one).
    func names(of asset: NodeID, rollName: Name, place: ViewPlacement?, _ db: Database) throws -> [ChangeSet.EntryName] {
        guard let place, let prefix = UInt64(place.sha256.prefix(12), radix: 16) else { return [] }
        let set = VirtualNode.duplicateSet(prefix: prefix)
        return [ChangeSet.EntryName(directory: set.id, name: rollName), ChangeSet.EntryName(directory: FixedNode.duplicates, name: set.name)]
    }

    func serves(_ id: NodeID) -> Bool {
        if id == FixedNode.duplicates { return true }
        if case .duplicateSet = VirtualNode(id) { return true }
        return false
    }

    func lookup(_ db: Database, in directory: NodeID, _ name: Name) throws -> ViewChild? {
        if directory == FixedNode.duplicates {
            guard let set = VirtualNode.duplicateSet(named: name), try exists(db, set) else { return nil }
            return .directory(set)
        }
        guard case .duplicateSet(let prefix) = VirtualNode(directory) else { return nil }
        return try asset(db, Self.source, key: .text(VirtualNode.hex(prefix)), named: name)
    }

    func list(_ db: Database, _ directory: NodeID, after cookie: Int64, limit: Int) throws -> [ViewEntry] {
        if directory == FixedNode.duplicates {
            // The cookie is the set's 48-bit prefix.
            return try db.duplicatedSHA256s().compactMap { sha256 -> ViewEntry? in
                guard let prefix = UInt64(sha256.prefix(12), radix: 16), Int64(prefix) > cookie else { return nil }
                let node = VirtualNode.duplicateSet(prefix: prefix)
                return ViewEntry(cookie: Int64(prefix), name: node.name, child: .directory(node))
            }.prefix(limit).map { $0 }
        }
        guard case .duplicateSet(let prefix) = VirtualNode(directory) else { return [] }
        return try assets(db, Self.source, key: .text(VirtualNode.hex(prefix)), after: cookie, limit: limit)
    }

    func exists(_ db: Database, _ node: VirtualNode) throws -> Bool {
        guard case .duplicateSet(let prefix) = node else { return false }
        return try db.viewListing(Self.source, key: .text(VirtualNode.hex(prefix)), after: 0, limit: 2).count == 2
    }
}
