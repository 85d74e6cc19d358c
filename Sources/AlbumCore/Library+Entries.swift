import SQLiteKit

/// Creating and removing entries: files, links, albums. What each does in a
/// directory is that directory's DirectoryPolicy.
extension Library {
    /// A new, empty file named `name`. In the roll: an asset. In an album,
    /// one transaction: the asset, its roll entry (`name`, or its first free
    /// `(n)` form) and its album entry. Under a side-file name
    /// (`Names.isSideFileName`), and in a trash's info/: a side file of that
    /// directory, never an asset.
    public func createAsset(in parent: NodeID, named name: Name, mode: UInt32, by caller: Caller) throws(LibraryError) -> (Attributes, ChangeSet) {
        try Names.validate(name)
        waitForFreedData()
        return try mutate(by: caller, freesSpace: false) { m -> Attributes in
            guard let policy = try m.policy(of: parent) else { throw LibraryError.notFound }
            if try m.entry(of: parent, named: name) != nil { throw LibraryError.exists }
            let id: NodeID
            var newFile = policy.newFile
            // A roll or album file under a side-file name belongs to its directory only.
            if newFile == .asset && Names.isSideFileName(name) { newFile = .sideFile }
            switch newFile {
            case .refused:
                throw LibraryError.notPermitted
            case .sideFile:
                id = try m.createSideFile(in: parent, named: name, mode: mode & 0o7777, owner: caller)
                try m.db.beginWrite(id)
            case .asset:
                id = try m.db.insertNode(kind: .asset, parent: nil, mode: mode, owner: caller, now: m.now)
                try m.db.beginWrite(id)
                // (In Hidden/: hidden from the start, in no roll.)
                if parent != m.roll && parent != m.hidden {
                    let rollName = try m.db.freeName(in: m.roll, for: name)
                    try m.db.insertEntry(m.roll, rollName, id)
                    // The roll's listing changed; its new name needs no name
                    // invalidation: it was free, and "no such name" is never cached.
                    try m.touched(m.roll)
                }
                try m.db.insertEntry(parent, name, id)
                try m.db.touchDirectory(parent, now: m.now)
                // Data before the row that points at it: created inside the
                // transaction and removed if it does not commit (a COMMIT that
                // fails on a full disk included: its id may go to an album
                // next); a crash before the commit leaves a file for an id the
                // next mount's clean-up takes back.
                try m.createContent(id)
                try pausePoints.reached(.createBeforeCommit)
            }
            guard let attributes = try m.db.attributes(of: id) else { throw LibraryError.inconsistent("node \(id) vanished inside its own transaction") }
            return attributes
        }
    }

    /// A new album in `Albums/` or in another album.
    public func makeAlbum(in parent: NodeID, named name: Name, mode: UInt32, by caller: Caller) throws(LibraryError) -> Attributes {
        try Names.validate(name)
        waitForFreedData()
        return try mutate(by: caller, freesSpace: false) { m -> Attributes in
            guard let policy = try m.policy(of: parent) else { throw LibraryError.notFound }
            if try m.entry(of: parent, named: name) != nil { throw LibraryError.exists }
            guard policy.makesAlbums else { throw LibraryError.notPermitted }
            let id = try m.db.insertNode(kind: .album, parent: parent, mode: mode, owner: caller, now: m.now)
            try m.db.insertEntry(parent, name, id)
            try m.db.touchDirectory(parent, now: m.now)
            guard let attributes = try m.db.attributes(of: id) else { throw LibraryError.inconsistent("node \(id) vanished inside its own transaction") }
            return attributes
        }.0
    }

    /// Adds an existing asset to an album under `name` (`ln`). No data is
    /// copied. The ChangeSet: what a pair's partner changed.
    @discardableResult
    public func link(_ asset: NodeID, into parent: NodeID, named name: Name) throws(LibraryError) -> (Attributes, ChangeSet) {
        try Names.validate(name)
        return try mutate(by: Caller(uid: 0, gid: 0), freesSpace: false) { m -> Attributes in
            // Only what the roll shows: not a deleted or hidden asset, nor an original.
            guard try m.db.kind(of: asset) == .asset, try m.db.name(of: asset, in: m.roll) != nil else { throw LibraryError.notPermitted }
            guard let policy = try m.policy(of: parent) else { throw LibraryError.notFound }
            switch policy.arrival {
            case .rollEntry: throw LibraryError.exists  // every asset is already there
            case .albumEntry: break
            case .favorite:
                try m.db.setFavorite(asset, true)
                if let partner = try m.db.partner(of: asset) { try m.db.setFavorite(partner, true) }
                try m.db.touchChangeTime(asset, now: m.now)
                guard let attributes = try m.db.attributes(of: asset) else { throw LibraryError.inconsistent("asset \(asset) vanished inside its own transaction") }
                return attributes
            default: throw LibraryError.notPermitted
            }
            if try m.db.name(of: asset, in: parent) != nil { throw LibraryError.exists }
            if try m.db.child(of: parent, named: name) != nil { throw LibraryError.exists }
            try m.db.insertEntry(parent, name, asset)
            try m.db.touchDirectory(parent, now: m.now)
            try m.db.touchChangeTime(asset, now: m.now)
            // A pair joins an album together (SEMANTICS.md § Pairs).
            if let partner = try m.db.partner(of: asset) { try m.addPartner(partner, to: parent) }
            guard let attributes = try m.db.attributes(of: asset) else { throw LibraryError.inconsistent("asset \(asset) vanished inside its own transaction") }
            return attributes
        }
    }

    /// `unlink`, as the directory's policy says: in the roll the asset is
    /// deleted (to Recently Deleted), in an album the reference goes, in
    /// Recently Deleted the asset is purged, in a trash's files/ the item
    /// leaves the trash; a side file is removed wherever it is.
    public func unlink(_ parent: NodeID, _ name: Name, by caller: Caller = Caller(uid: 0, gid: 0)) throws(LibraryError) -> ChangeSet {
        try mutate(by: caller) { m in
            guard let child = try m.child(of: parent, named: name) else { throw LibraryError.notFound }
            if VirtualNode(child) != nil { throw LibraryError.isDirectory }
            let childKind = try m.kind(of: child)
            guard !childKind.isDirectory else { throw LibraryError.isDirectory }
            guard let policy = try m.policy(of: parent) else { throw LibraryError.notFound }
            if childKind == .sideFile {
                try m.removeSideFile(parent, name, child)
                m.changes.dropEntry(parent, name)
                m.changes.handledByKernel(directories: [parent], node: child)
                return
            }
            switch policy.removal {
            case .deleteAsset: try m.deleteAsset(child, except: parent)
            case .dropReference: try m.dropReference(parent, name, child)
            case .purge: try m.purge(child, except: parent)
            case .expunge: try m.expunge(parent, name, child, childKind)
            case .discardOriginal: try m.purge(child)
            case .unfavorite:
                try m.db.setFavorite(child, false)
                if let partner = try m.db.partner(of: child) { try m.db.setFavorite(partner, false) }
                try m.db.touchChangeTime(child, now: m.now)
                m.changes.node(child)
            case .refused: throw LibraryError.notPermitted
            }
            m.changes.dropEntry(parent, name)
            m.changes.handledByKernel(directories: [parent], node: child)
        }.1
    }

    /// Frees the data of nodes whose deletion has committed, in the
    /// background (DeferredFrees: what needs the space waits for it). Their
    /// purges are done (`purgeDone`: the facts and `pending_purges` rows go)
    /// in a later change's transaction, `purgeBatch` at a time; until then,
    /// and after an unmount or a crash until the next mount's recovery, a
    /// pending purge's facts are there with no node, which every reader of
    /// facts skips.
    func freeData(of ids: [NodeID]) {
        guard !ids.isEmpty else { return }
        deferredFrees.enqueue(ids)
    }

    /// Returns once the data of every purge so far is freed: `df` and any
    /// operation that takes space see it (SEMANTICS.md § Recently Deleted).
    public func waitForFreedData() {
        deferredFrees.wait()
    }

    /// In a change's transaction: once `purgeBatch` purges have their data
    /// freed, they are done, together (Empty Trash: a page of the facts
    /// table or of one of its indexes is written once for many).
    func finishFreedPurges(_ db: Database) throws {
        for id in deferredFrees.takeFreed(batch: Self.purgeBatch) { try db.purgeDone(id) }
    }

    static let purgeBatch = 256

    /// `rmdir`: removes an empty album; in a trash's files/, a trashed album
    /// leaves the trash for good. Fixed directories cannot be removed.
    public func removeAlbum(_ parent: NodeID, _ name: Name, by caller: Caller = Caller(uid: 0, gid: 0)) throws(LibraryError) -> ChangeSet {
        try mutate(by: caller) { m in
            guard let child = try m.child(of: parent, named: name) else { throw LibraryError.notFound }
            if ComputedViews.view(serving: parent) != nil { throw LibraryError.notPermitted }
            let childKind = try m.kind(of: child)
            switch childKind {
            case .album, .trashedAlbum: break
            case .asset, .sideFile: throw LibraryError.notDirectory
            default: throw LibraryError.notPermitted
            }
            guard let policy = try m.policy(of: parent), policy.removesDirectories else { throw LibraryError.notPermitted }
            if try m.db.hasEntries(child) { throw LibraryError.notEmpty }
            if policy.removal == .expunge {
                try m.expunge(parent, name, child, childKind)
            } else {
                try m.db.deleteNode(child)
                try m.db.touchDirectory(parent, now: m.now)
            }
            m.changes.dropEntry(parent, name)
        }.1
    }
}
