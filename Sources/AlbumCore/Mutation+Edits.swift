import SQLiteKit

/// An edit never loses the original: what an update does with the version
/// it replaces, Revert to Original, and discarding an original.
/// SEMANTICS.md § Edits keep the original.
///
/// An original is a node of kind asset with no entry anywhere, named by its
/// edited asset's `originals` row; `Smart Albums/Originals/` shows it under
/// the edited asset's roll name. Its data and attributes never change
/// (Database.isUnchangeable).
extension Mutation {
    /// The update rule, once `moving` has taken `replaced`'s entries: it is
    /// the asset now (favorite flag, memberships remembered while hidden,
    /// identifier), and `replaced` becomes its original (the first version),
    /// or goes to Recently Deleted (an intermediate version, or one replaced
    /// by an asset that has an original of its own). `except`: the directory
    /// the request names (its entry is the kernel's to drop).
    mutating func supersede(_ replaced: NodeID, by moving: NodeID, except directory: NodeID) throws {
        if try db.partner(of: moving) == nil { try db.handOverPair(from: replaced, to: moving) }
        if try db.isFavorite(replaced) { try db.setFavorite(moving, true) }
        try db.handOverRememberedEntries(from: replaced, to: moving)
        try db.setAssetIdentifier(of: moving, to: try db.assetIdentifier(of: replaced))
        guard try db.original(of: moving) == nil else {
            try retire(replaced, except: directory)
            return
        }
        if let first = try db.original(of: replaced) {
            try db.forgetOriginal(of: replaced)
            try db.setOriginal(of: moving, to: first)
            try retire(replaced, except: directory)
            return
        }
        // The first version: out of every directory, kept with the asset.
        for (entryDirectory, entryName) in try db.entries(of: replaced) {
            if try db.kind(of: entryDirectory) == .trashFiles {
                // A reference trashed earlier: restoring it brings the asset.
                try db.repointEntry(entryDirectory, entryName, to: moving)
                continue
            }
            try deleteEntry(entryDirectory, entryName)
            if entryDirectory == directory { try touched(entryDirectory) } else { try vanished(entryDirectory, entryName) }
        }
        try db.setOriginal(of: moving, to: replaced)
        try db.touchChangeTime(replaced, now: now)
    }

    /// A version that leaves its asset goes to Recently Deleted as an asset
    /// of its own (its own identifier again).
    private mutating func retire(_ version: NodeID, except directory: NodeID) throws {
        try db.setAssetIdentifier(of: version, to: version)
        try deleteAsset(version, except: directory)
    }

    /// Revert to Original: `mv "Smart Albums/Originals/x"` onto a name of the
    /// edited asset. The original takes the edited version's place
    /// everywhere (roll or Hidden/ name, albums, favorite, identifier); the
    /// edited version goes to Recently Deleted with no albums.
    mutating func revert(_ edited: NodeID, to original: NodeID) throws {
        guard try db.original(of: edited) == original else { throw LibraryError.notPermitted }
        let rollName = try db.name(of: edited, in: roll)
        let hiddenName = try db.name(of: edited, in: hidden)
        for (directory, name) in try db.entries(of: edited) where try db.kind(of: directory) == .album {
            try deleteEntry(directory, name)
            try db.insertEntry(directory, name, original)
            try vanished(directory, name)
        }
        if try db.isFavorite(edited) { try db.setFavorite(original, true) }
        try db.handOverPair(from: edited, to: original)
        try db.handOverRememberedEntries(from: edited, to: original)
        try db.setAssetIdentifier(of: original, to: try db.assetIdentifier(of: edited))
        try db.forgetOriginal(of: edited)
        try retire(edited, except: roll)
        // Its roll (or Hidden/) name now shows the original.
        if let rollName {
            try db.insertEntry(roll, rollName, original)
            try vanished(roll, rollName)
        }
        if let hiddenName {
            try db.insertEntry(hidden, hiddenName, original)
            try vanished(hidden, hiddenName)
        }
        try db.touchChangeTime(original, now: now)
        changes.node(original)
        changes.node(edited)
    }
}
