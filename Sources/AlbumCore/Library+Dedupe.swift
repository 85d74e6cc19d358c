/// `albumfs dedupe`: each set of live assets with the same SHA-256 becomes
/// one asset, as Photos' "Merge" does (SEMANTICS.md § the computed views):
/// the earliest imported is kept, it joins every album any member was in
/// (under that member's album name, the (n) rule on a clash), it is a
/// favorite if any member was, and the others go to Recently Deleted. One
/// transaction per set.
extension Library {
    public struct DuplicateSet: Sendable {
        public let sha256: String
        /// The asset kept and its roll name.
        public let kept: NodeID
        public let keptName: Name
        /// The others (to Recently Deleted unless a dry run), with their roll names.
        public let merged: [(id: NodeID, name: Name)]
    }

    public func dedupe(dryRun: Bool, by caller: Caller = Caller(uid: 0, gid: 0)) throws(LibraryError) -> [DuplicateSet] {
        let sets = try read { db in try db.duplicatedSHA256s() }
        var done: [DuplicateSet] = []
        for sha256 in sets {
            let merge = { (m: inout Mutation) throws -> DuplicateSet? in
                let members = try m.db.assets(withSHA256: sha256)
                guard let kept = members.first, members.count > 1 else { return nil }
                let roll = FixedNode.cameraRoll
                let named = try members.map { ($0, try m.db.name(of: $0, in: roll) ?? []) }
                let set = DuplicateSet(sha256: sha256, kept: kept, keptName: named[0].1, merged: Array(named.dropFirst()))
                if dryRun { return set }
                for (other, _) in set.merged {
                    let albums = try m.db.entries(of: other).filter { try m.db.kind(of: $0.directory) == .album }
                    if try m.db.isFavorite(other) { try m.db.setFavorite(kept, true) }
                    try m.deleteAsset(other, except: nil)
                    // Its album names are free now: the kept asset takes them.
                    for (album, name) in albums where try m.db.name(of: kept, in: album) == nil {
                        try m.db.insertEntry(album, try m.db.freeName(in: album, for: name), kept)
                        try m.touched(album)
                    }
                }
                try m.db.touchChangeTime(kept, now: m.now)
                m.changes.node(kept)
                return set
            }
            if let set = try mutate(by: caller, merge).0 { done.append(set) }
        }
        return done
    }
}
