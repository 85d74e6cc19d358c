/// What FileManagerThumbnails needs of the library.
extension Library {
    /// The thumbnail made with the asset's facts (SEMANTICS.md § Thumbnails); nil before they are read, or for what has none.
    public func thumbnail(of asset: NodeID) throws(LibraryError) -> [UInt8]? {
        try read { db in try db.thumbnail(of: asset) }
    }

    /// Those of `assets` that have a thumbnail here, and those whose
    /// thumbnail only the bucket has (ThumbnailObjects), in one read (no PNG is read).
    func thumbnailPlaces(of assets: [NodeID]) throws(LibraryError)
        -> (here: Set<NodeID>, inBucket: [(asset: NodeID, object: String, sha256: String)]) {
        try read { db in try db.thumbnailPlaces(of: assets) }
    }

    /// The thumbnails of those of `assets` that have one, in one read.
    public func thumbnails(of assets: [NodeID]) throws(LibraryError) -> [NodeID: [UInt8]] {
        try read { db in
            var found: [NodeID: [UInt8]] = [:]
            for asset in assets { if let png = try db.thumbnail(of: asset) { found[asset] = png } }
            return found
        }
    }

    /// The names from the root down to `directory` (empty for the root);
    /// nil if it is not a directory any more.
    public func path(ofDirectory directory: NodeID) throws(LibraryError) -> [Name]? {
        var names: [Name] = []
        var id = directory
        // Albums nest; a loop in the store (fsck's to find) must not hang a listing.
        for _ in 0..<4096 {
            if id == FixedNode.root { return names.reversed() }
            if let node = VirtualNode(id) {
                names.append(node.name)
                id = node.parent
                continue
            }
            let step = try read { db -> (NodeID, Name)? in
                guard let parent = try db.parent(ofDirectory: id), let name = try db.name(of: id, in: parent) else { return nil }
                return (parent, name)
            }
            guard let (parent, name) = step else { return nil }
            names.append(name)
            id = parent
        }
        return nil
    }
}
