#if canImport(Glibc)
import Glibc
#endif

/// `albumfs dedupe`: each set of live assets with the same SHA-256 becomes
/// one asset, as Photos' "Merge" does (SEMANTICS.md § the computed views):
/// the earliest imported is kept (a paired one before any: § Pairs), it joins every album any member was in
/// (under that member's album name, the (n) rule on a clash), it is a
/// favorite if any member was, and the others go to Recently Deleted. One
/// transaction per set.
///
/// Only what is proven identical now is merged: the recorded SHA-256 only
/// proposes a set. Each member's data is hashed again, and a member is left
/// out when it is open for writing or marked as being written, when its
/// data changes while it is hashed, or when it changes between its hash and
/// the merge's transaction (which checks the data's size and mtime again).
/// So an edit the indexer has not read yet never merges a photo away.
extension Library {
    public struct DuplicateSet: Sendable {
        public let sha256: String
        /// The asset kept and its roll name.
        public let kept: NodeID
        public let keptName: Name
        /// The others (to Recently Deleted unless a dry run), with their roll names.
        public let merged: [(id: NodeID, name: Name)]
    }

    /// Every set, each hashed anew with `hasher`.
    public func dedupe(dryRun: Bool, hashing hasher: any AssetFactsReader,
                       by caller: Caller = Caller(uid: 0, gid: 0)) throws(LibraryError) -> [DuplicateSet] {
        var done: [DuplicateSet] = []
        for sha256 in try read({ db in try db.duplicatedSHA256s() }) {
            if let set = try merge(sha256: sha256, dryRun: dryRun, hasher: hasher, by: caller).0 { done.append(set) }
        }
        return done
    }

    /// The set shown as `Smart Albums/Duplicates/H` merged, in one
    /// transaction (`setfattr -n user.albumfs.merge -v 1` on that directory:
    /// how `albumfs dedupe` merges the sets of a mounted library), or only
    /// planned (`dryRun`: what `getfattr -n user.albumfs.merge` answers).
    public func mergeDuplicates(shownIn directory: NodeID, dryRun: Bool = false,
                                by caller: Caller) throws(LibraryError) -> (DuplicateSet, ChangeSet) {
        guard case .duplicateSet(let prefix) = VirtualNode(directory) else { throw .notPermitted }
        guard let hasher = options.factsReader else { throw .notSupported }
        let hex = VirtualNode.hex(prefix)
        guard let sha256 = try read({ db in try db.duplicatedSHA256s() }).first(where: { $0.hasPrefix(hex) }) else { throw .notFound }
        let (set, changes) = try merge(sha256: sha256, dryRun: dryRun, hasher: hasher, by: caller)
        guard let set else { throw .notFound }
        return (set, changes)
    }

    /// What `getfattr -n user.albumfs.merge` on a set's directory answers:
    /// the roll names of the members a merge would take now, each ended by
    /// a NUL, the one it keeps first.
    func mergePlan(shownIn directory: NodeID) throws(LibraryError) -> [UInt8] {
        let set = try mergeDuplicates(shownIn: directory, dryRun: true, by: Caller(uid: 0, gid: 0)).0
        return ([set.keptName] + set.merged.map(\.name)).flatMap { $0 + [0] }
    }

    private func merge(sha256: String, dryRun: Bool, hasher: any AssetFactsReader,
                       by caller: Caller) throws(LibraryError) -> (DuplicateSet?, ChangeSet) {
        let proven = try proveIdentical(sha256: sha256, hasher: hasher)
        guard proven.count > 1 else { return (nil, ChangeSet()) }
        let (content, openFiles) = (self.content, self.openFiles)
        return try mutate(by: caller) { m -> DuplicateSet? in
            // Oldest import first; only what is still as it was hashed.
            var members = try m.db.assets(withSHA256: sha256).filter { id in
                guard let stamp = proven[id], content.stamp(of: id) == stamp, !openFiles.isOpenForWriting(id) else { return false }
                return try !m.db.isBeingWritten(id)
            }
            // A paired member is kept (its other half goes with what is
            // deleted); two paired members: left alone (SEMANTICS.md § Pairs).
            let paired = try members.filter { try m.db.partner(of: $0) != nil }
            if paired.count > 1 { return nil }
            if let keep = paired.first { members = [keep] + members.filter { $0 != keep } }
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

    /// The members of the set `sha256` whose data hashes to it now, with the
    /// size and mtime their data had while it was hashed (unchanged from
    /// start to end). Hashed with no lock held.
    private func proveIdentical(sha256: String, hasher: any AssetFactsReader) throws(LibraryError) -> [NodeID: ContentStamp] {
        let openFiles = self.openFiles
        let candidates = try read { db in
            try db.assets(withSHA256: sha256).filter { try !db.isBeingWritten($0) && !openFiles.isOpenForWriting($0) }
        }
        var proven: [NodeID: ContentStamp] = [:]
        for id in candidates {
            guard let descriptor = try? content.open(id, writable: false) else { continue }
            defer { close(descriptor) }
            guard let before = ContentStamp(descriptor: descriptor),
                  (try? hasher.sha256(ofFileAt: descriptor)) == sha256,
                  ContentStamp(descriptor: descriptor) == before else { continue }
            proven[id] = before
        }
        return proven
    }
}
