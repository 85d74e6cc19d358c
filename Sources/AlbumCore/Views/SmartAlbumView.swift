import SQLiteKit

/// A smart album: the live assets one query chooses (SEMANTICS.md § the
/// computed views). Favorites is one too; its policy lets `ln` and `rm` in.
struct SmartAlbumView: ComputedView {
    let directory: ViewDirectory
    /// SQL giving the column `asset` (ViewQueries), served by an index of asset_facts or favorites.
    let source: String

    static let videos = SmartAlbumView(directory: ViewDirectory(FixedNode.videos, .computedView, in: FixedNode.smartAlbums, "Videos"),
                                       source: ViewQueries.videos)
    static let screenshots = SmartAlbumView(directory: ViewDirectory(FixedNode.screenshots, .computedView, in: FixedNode.smartAlbums, "Screenshots"),
                                            source: ViewQueries.screenshots)
    static let raw = SmartAlbumView(directory: ViewDirectory(FixedNode.raw, .computedView, in: FixedNode.smartAlbums, "RAW"),
                                    source: ViewQueries.raw)
    static let favorites = SmartAlbumView(directory: ViewDirectory(FixedNode.favorites, .favorites, in: FixedNode.smartAlbums, "Favorites"),
                                          source: ViewQueries.favorites)
    static let livePhotos = SmartAlbumView(directory: ViewDirectory(FixedNode.livePhotos, .computedView, in: FixedNode.smartAlbums, "Live Photos"),
                                           source: ViewQueries.livePhotos)

    static let edited = SmartAlbumView(directory: ViewDirectory(FixedNode.edited, .computedView, in: FixedNode.smartAlbums, "Edited"),
                                       source: ViewQueries.edited)

    func serves(_ id: NodeID) -> Bool { id == directory.id }

    func lookup(_ db: Database, in directory: NodeID, _ name: Name) throws -> ViewChild? {
        try asset(db, source, named: name)
    }

    func list(_ db: Database, _ directory: NodeID, after cookie: Int64, limit: Int) throws -> [ViewEntry] {
        try assets(db, source, after: cookie, limit: limit)
    }

    func exists(_ db: Database, _ node: VirtualNode) throws -> Bool { false }

    func names(of asset: NodeID, rollName: Name, place: ViewPlacement?, _ db: Database) throws -> [ChangeSet.EntryName] {
        try db.viewShows(source, asset) ? [ChangeSet.EntryName(directory: directory.id, name: rollName)] : []
    }
}
