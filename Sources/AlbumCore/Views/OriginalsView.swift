import SQLiteKit

/// `Smart Albums/Originals/`: the original of every edited asset the roll
/// shows, under that asset's roll name (SEMANTICS.md § Edits keep the
/// original). Its policy lets a rename out revert and an unlink discard.
struct OriginalsView: ComputedView {
    let directory = ViewDirectory(FixedNode.originals, .originals, in: FixedNode.smartAlbums, "Originals")

    func serves(_ id: NodeID) -> Bool { id == directory.id }

    func lookup(_ db: Database, in directory: NodeID, _ name: Name) throws -> ViewChild? {
        try db.originalLookup(name: name).map { .asset($0) }
    }

    func list(_ db: Database, _ directory: NodeID, after cookie: Int64, limit: Int) throws -> [ViewEntry] {
        try db.originalsListing(after: cookie, limit: limit)
            .map { ViewEntry(cookie: $0.cookie, name: $0.name, child: .asset($0.attributes)) }
    }

    func exists(_ db: Database, _ node: VirtualNode) throws -> Bool { false }

    func names(of asset: NodeID, rollName: Name, place: ViewPlacement?, _ db: Database) throws -> [ChangeSet.EntryName] {
        try db.original(of: asset) == nil ? [] : [ChangeSet.EntryName(directory: directory.id, name: rollName)]
    }
}
