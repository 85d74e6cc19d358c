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
        var done: [DuplicateSet] = []
        for sha256 in try read({ db in try db.duplicatedSHA256s() }) {
            if let set = try merge(sha256: sha256, dryRun: dryRun, by: caller).0 { done.append(set) }
        }
        return done
    }

    /// The set shown as `Smart Albums/Duplicates/H` merged, in one
    /// transaction (`setfattr -n user.albumfs.merge -v 1` on that directory:
    /// how `albumfs dedupe` merges the sets of a mounted library).
    public func mergeDuplicates(shownIn directory: NodeID, by caller: Caller) throws(LibraryError) -> (DuplicateSet, ChangeSet) {
        guard case .duplicateSet(let prefix) = VirtualNode(directory) else { throw .notPermitted }
        let hex = VirtualNode.hex(prefix)
        guard let sha256 = try read({ db in try db.duplicatedSHA256s() }).first(where: { $0.hasPrefix(hex) }) else { throw .notFound }
        let (set, changes) = try merge(sha256: sha256, dryRun: false, by: caller)
        guard let set else { throw .notFound }
        return (set, changes)
    }

    private func merge(sha256: String, dryRun: Bool, by caller: Caller) throws(LibraryError) -> (DuplicateSet?, ChangeSet) {
        try mutate(by: caller) { m -> DuplicateSet? in
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
    }
}
