import SQLiteKit

/// Deleting, restoring and purging assets, and everything that leaves or
/// enters a trash. SEMANTICS.md § Recently Deleted, and the file manager's trash.
///
/// A deleted asset keeps its node, data and xattrs; it loses its roll and
/// album entries (the album ones are remembered), gains an entry in
/// Recently Deleted and one in a trash's files/ (with its `.trashinfo` when
/// albumfs put it there, written when first needed), and a `deleted_assets`
/// row. Each of these changes is one transaction of its caller; a purge frees
/// the data only after it committed (pending_purges).
extension Mutation {
    // MARK: delete

    /// Deletes a live asset: it leaves the roll and every album at once. With
    /// a retention period it goes to Recently Deleted, and to `trashEntry`
    /// (a file manager's rename into files/) or else to the caller's own trash
    /// under a free name with a `.trashinfo` albumfs writes; without one it is
    /// purged. `except`: the directory whose entry the request itself removes.
    mutating func deleteAsset(_ id: NodeID, except: NodeID?, trashEntry: (directory: NodeID, name: Name)? = nil) throws {
        guard options.retention != nil else {
            try purge(id, except: except)
            return
        }
        // The name it is shown by: its roll entry, or its entry in Hidden/.
        var shown: (directory: NodeID, name: Name)?
        for (directory, name) in try db.entries(of: id) {
            if directory == roll || directory == hidden {
                shown = (directory, name)
            } else if try db.kind(of: directory) == .album {
                try db.remember(id, album: directory, name: name)
            } else {
                continue  // trash entries: references trashed earlier stay
            }
            try deleteEntry(directory, name)
            if directory == except { try touched(directory) } else { try vanished(directory, name) }
        }
        guard let (shownIn, rollName) = shown else { throw LibraryError.notFound }
        try db.insertEntry(recentlyDeleted, try db.freeName(in: recentlyDeleted, for: rollName), id)
        try touched(recentlyDeleted)
        var trashItem = trashEntry
        var infoPath: Name?
        if let trashEntry {
            try db.insertEntry(trashEntry.directory, trashEntry.name, id)
            try touched(trashEntry.directory)
        } else if let trash = try ensureTrash(of: caller) {
            let name = try freeTrashName(in: trash, for: rollName)
            try db.insertEntry(trash.files, name, id)
            try touched(trash.files)
            // Its .trashinfo, written when first needed (writeUnwrittenTrashInfos).
            try touched(trash.info)
            infoPath = (shownIn == hidden ? FixedNode.hiddenName : FixedNode.cameraRollName) + [0x2f] + rollName
            trashItem = (trash.files, name)
        }
        try db.insertDeletedAsset(id, at: now, trash: trashItem, unwrittenInfoPath: infoPath)
        // Its ctime is the deletion time (Recently Deleted shows it so).
        try db.touchChangeTime(id, now: now)
        changes.node(id)
        // A pair is deleted together (SEMANTICS.md § Pairs).
        if let partner = try db.partner(of: id), try isShown(partner) { try deleteAsset(partner, except: nil) }
    }

    // MARK: restore

    /// Brings a deleted asset back: into the roll as `rollName` (a roll entry
    /// of that name is replaced, as any rename over it: its asset is deleted)
    /// or, without one, under its Recently Deleted name (the (n) rule); into
    /// every remembered album that still exists, under its old name (the (n)
    /// rule); and into `album` under `albumName` if given.
    mutating func restore(_ id: NodeID, rollName: Name?, album: (directory: NodeID, name: Name)? = nil) throws {
        guard let record = try db.deletedAsset(id) else { throw LibraryError.notFound }
        var recentlyDeletedName: Name?
        for name in try db.names(of: id, in: recentlyDeleted) {
            recentlyDeletedName = name
            try deleteEntry(recentlyDeleted, name)
            try vanished(recentlyDeleted, name)
        }
        if let trash = record.trash { try leaveTrash(trash.directory, trash.name) }
        let name: Name
        if let rollName {
            if let replaced = try db.child(of: roll, named: rollName) {
                try deleteAsset(replaced, except: roll)
            }
            name = rollName
        } else {
            name = try db.freeName(in: roll, for: recentlyDeletedName ?? Array("recovered-\(id)".utf8))
        }
        try db.insertEntry(roll, name, id)
        try touched(roll)
        if let album {
            try db.insertEntry(album.directory, album.name, id)
            try touched(album.directory)
        }
        try bringBackRememberedAlbums(of: id, except: album?.directory)
        try db.removeDeletedAsset(id)
        try db.touchChangeTime(id, now: now)
        changes.node(id)
        if let partner = try db.partner(of: id), try db.isDeleted(partner) {
            try restore(partner, rollName: nil)
            if let album { try addPartner(partner, to: album.directory) }
        }
    }

    /// Puts a deleted or hidden asset back into every remembered album
    /// that still exists, under its old name (the (n) rule on a clash), but
    /// `except` (which the caller fills itself), and forgets them.
    mutating func bringBackRememberedAlbums(of id: NodeID, except: NodeID?) throws {
        for (remembered, albumName) in try db.rememberedEntries(of: id) where remembered != except {
            // Albums removed since are dropped; a clash takes the (n) rule.
            guard try isLiveAlbum(remembered) else { continue }
            try db.insertEntry(remembered, try db.freeName(in: remembered, for: albumName), id)
            try touched(remembered)
        }
        try db.forgetRememberedEntries(of: id)
    }

    // MARK: purge

    /// Deletes an asset for good: node, entries (Recently Deleted, trashes,
    /// what trashed albums put aside), attributes; its data is freed after
    /// the commit.
    mutating func purge(_ id: NodeID, except: NodeID? = nil) throws {
        for (directory, name) in try db.entries(of: id) {
            if directory == except { try touched(directory) } else { try vanished(directory, name) }
            if try db.kind(of: directory) == .trashFiles { try removeTrashInfo(of: directory, name) }
        }
        try db.forgetRememberedEntries(of: id)
        try db.forgetPutAsideEntries(of: id)
        try db.removeDeletedAsset(id)
        // An edited asset's original goes with it; a discarded original
        // leaves its asset unedited (SEMANTICS.md § Edits keep the original).
        if let original = try db.original(of: id) {
            try db.forgetOriginal(of: id)
            try purge(original)
        }
        if let edited = try db.editedAsset(withOriginal: id) { try db.forgetOriginal(of: edited) }
        if let partner = try db.partner(of: id) {
            try db.deletePair(of: id)
            try purge(partner)
        }
        try db.setAssetIdentifier(of: id, to: id)
        try db.deleteNode(id)
        try db.schedulePurge(id)
        try db.forgetRemote(of: id)
        purged.append(id)
        // No attribute invalidation: every name it had is invalidated above,
        // and a node that is gone has no attributes to refresh.
    }

    /// Purges every asset deleted more than the retention period ago, at
    /// most `limit` of them. Returns how many.
    mutating func purgeExpired(limit: Int) throws -> Int {
        let cutoff = options.retention.map { now - $0 } ?? Nanoseconds.max
        let expired = try db.assetsDeleted(atOrBefore: cutoff, limit: limit)
        for id in expired { try purge(id) }
        return expired.count
    }

    // MARK: references

    /// A rename onto album entry `name` replaces it: that asset loses the
    /// reference (the kernel drops the replaced name itself).
    mutating func replaceReference(in album: NodeID, named name: Name) throws {
        guard let target = try db.child(of: album, named: name) else { return }
        guard try kind(of: target) == .asset else { throw LibraryError.isDirectory }
        try dropReference(album, name, target)
    }

    /// `rm Albums/A/x`: that reference only.
    mutating func dropReference(_ album: NodeID, _ name: Name, _ asset: NodeID) throws {
        try deleteEntry(album, name)
        try touched(album)
        try db.touchChangeTime(asset, now: now)
        changes.node(asset)
        if let partner = try db.partner(of: asset) { try dropPartner(partner, from: album) }
    }
}
