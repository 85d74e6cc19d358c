import SQLiteKit

/// A smart album: the live assets one query chooses (SEMANTICS.md § the
/// computed views). Favorites is one too; its policy lets `ln` and `rm` in.
struct SmartAlbumView: ComputedView {
    let id: NodeID
    /// SQL giving the column `asset`, served by an index of asset_facts or favorites.
    let source: String

    static let videos = SmartAlbumView(id: FixedNode.videos, source: "SELECT asset FROM asset_facts WHERE kind = 'video'")
    static let screenshots = SmartAlbumView(id: FixedNode.screenshots, source: "SELECT asset FROM asset_facts WHERE screenshot = 1")
    static let raw = SmartAlbumView(id: FixedNode.raw, source: "SELECT asset FROM asset_facts WHERE raw = 1")
    static let favorites = SmartAlbumView(id: FixedNode.favorites, source: "SELECT asset FROM favorites")
    /// Both halves of each pair: a photo and a video with one content identifier.
    static let livePhotos = SmartAlbumView(id: FixedNode.livePhotos, source: """
        SELECT f.asset AS asset FROM asset_facts f
        WHERE f.content_id IS NOT NULL AND f.kind IN ('photo', 'video')
        AND EXISTS (SELECT 1 FROM asset_facts p WHERE p.content_id = f.content_id
                    AND p.kind IN ('photo', 'video') AND p.kind <> f.kind
                    AND EXISTS (SELECT 1 FROM nodes n WHERE n.id = p.asset))
        """)

    func serves(_ directory: NodeID) -> Bool { directory == id }

    func lookup(_ db: Database, in directory: NodeID, _ name: Name) throws -> ViewChild? {
        try asset(db, source, named: name)
    }

    func list(_ db: Database, _ directory: NodeID, after cookie: Int64, limit: Int) throws -> [ViewEntry] {
        try assets(db, source, after: cookie, limit: limit)
    }

    func exists(_ db: Database, _ node: VirtualNode) throws -> Bool { false }
}
