import SQLiteKit

/// rename(2), as SEMANTICS.md's tables say. One transaction per call; every
/// refusal is checked before anything changes (and a throw rolls back anyway).
extension Library {
    public struct RenameFlags: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// RENAME_NOREPLACE: fail with EEXIST when the target exists.
        public static let noReplace = RenameFlags(rawValue: 1)
        /// RENAME_EXCHANGE: not supported (EINVAL).
        public static let exchange = RenameFlags(rawValue: 2)
    }

    public func rename(_ oldParent: NodeID, _ oldName: Name, to newParent: NodeID, _ newName: Name,
                       flags: RenameFlags = [], by caller: Caller = Caller(uid: 0, gid: 0)) throws(LibraryError) -> ChangeSet {
        if flags.contains(.exchange) { throw .invalidArgument }
        try Names.validate(newName)
        let (becameAsset, changes) = try mutate(by: caller) { m -> NodeID? in
            let source = try m.entry(of: oldParent, named: oldName)
            let wasSideFile = try source.map { try m.db.kind(of: $0) == .sideFile } ?? false
            try m.rename(oldParent, oldName, to: newParent, newName, noReplace: flags.contains(.noReplace))
            m.changes.handledByKernel(directories: [oldParent, newParent], node: source)
            guard wasSideFile, let source, try m.db.kind(of: source) == .asset else { return nil }
            return source
        }
        // rsync's `.x.TMP` → `x`: its last writer closed it while it was a
        // side file (which has no facts), so it is read now.
        // It was queued for upload too.
        if let becameAsset {
            indexer?.enqueue(becameAsset, of: self)
            wakeRemoteSync()
        }
        return changes
    }
}

/// One rename's work inside its transaction: routed by what the moving entry
/// is and by the policies of the two directories.
extension Mutation {
    mutating func rename(_ oldParent: NodeID, _ oldName: Name, to newParent: NodeID, _ newName: Name, noReplace: Bool) throws {
        // Revert to Original: an original moved onto a name of its edited asset.
        if try db.kind(of: oldParent) == .originals {
            guard let original = try child(of: oldParent, named: oldName) else { throw LibraryError.notFound }
            guard let edited = try entry(of: newParent, named: newName) else { throw LibraryError.notPermitted }
            try revert(edited, to: original)
            return
        }
        // Computed views change only by what their assets are (and Favorites by ln and rm).
        if ComputedViews.view(serving: oldParent) != nil || ComputedViews.view(serving: newParent) != nil {
            guard try child(of: oldParent, named: oldName) != nil else { throw LibraryError.notFound }
            throw LibraryError.notPermitted
        }
        guard let source = try entry(of: oldParent, named: oldName),
              let sourceKind = try db.kind(of: source) else { throw LibraryError.notFound }
        guard let oldPolicy = try policy(of: oldParent), let newPolicy = try policy(of: newParent) else { throw LibraryError.notFound }
        let oldParentKind = try kind(of: oldParent)
        let target = try entry(of: newParent, named: newName)
        // Two names of one file: rename(2) does nothing.
        if target == source { return }
        if target != nil && noReplace { throw LibraryError.exists }
        if sourceKind.isFixed { throw LibraryError.notPermitted }

        if sourceKind == .sideFile, oldPolicy.newFile == .asset, newPolicy.arrival != .trashItem {
            try moveSideFile(source, from: oldParent, oldName, to: newParent, newPolicy, newName, replacing: target)
            return
        }
        switch (oldPolicy.removal, newPolicy.arrival) {
        case (_, .expunge) where oldPolicy.removal == .expunge:
            // GIO's "delete from trash": into expunged/, gone at once.
            try expunge(oldParent, oldName, source, sourceKind)
        case (.expunge, _):
            try restoreFromTrash(oldParent, oldName, source, to: newParent, newPolicy, newName)
        case (.purge, .rollEntry):
            try restore(source, rollName: newName)
        case (.purge, .albumEntry):
            try replaceReference(in: newParent, named: newName)
            try restore(source, rollName: nil, album: (newParent, newName))
        case (.purge, .hide):
            try restore(source, rollName: nil)
            try hide(source, from: (roll, []), as: newName, replacing: target)
        case (_, .trashItem):
            try putInTrash(source, sourceKind, from: oldParent, oldParentKind, oldName, to: newParent, newName)
        case (_, .hide) where oldParent == newParent:
            // Within Hidden/: a rename, or an update (edits keep the original).
            guard sourceKind == .asset else { throw LibraryError.notPermitted }
            try moveAsset(source, from: oldParent, oldName, to: newParent, newPolicy, newName, replacing: target)
        case (.deleteAsset, .rollEntry) where oldParentKind == .hidden, (.deleteAsset, .albumEntry) where oldParentKind == .hidden:
            guard sourceKind == .asset else { throw LibraryError.notPermitted }
            try unhide(source, oldName, to: newParent, newPolicy, newName)
        case (.deleteAsset, .hide), (.dropReference, .hide):
            guard sourceKind == .asset else { throw LibraryError.notPermitted }
            try hide(source, from: (oldParent, oldName), as: newName, replacing: target)
        case (_, .withinOnly) where oldParent == newParent && sourceKind == .sideFile:
            if let target { try removeSideFile(newParent, newName, target) }
            try moveEntry(oldParent, oldName, to: newParent, newName)
            try touched(newParent)
        case (.dropReference, _) where sourceKind == .album, (.refused, _) where sourceKind == .album:
            try moveAlbum(source, from: oldParent, oldName, to: newParent, newPolicy, newName, replacing: target)
        case (.deleteAsset, .rollEntry), (.deleteAsset, .albumEntry), (.dropReference, .rollEntry), (.dropReference, .albumEntry):
            guard sourceKind == .asset else { throw LibraryError.notPermitted }
            try moveAsset(source, from: oldParent, oldName, to: newParent, newPolicy, newName, replacing: target)
        default:
            throw LibraryError.notPermitted
        }
    }

    /// A side file of the roll or an album renamed: under another side-file
    /// name it stays one (a side file it replaces is removed); under an
    /// ordinary name, or over an asset, it becomes an asset exactly as if it
    /// had been created there under that name (roll entry, album entry, the
    /// (n) rule, the update rule), without copying a byte. This is how rsync,
    /// GIO's "Replace" and safe-saving editors land a photo: the temporary
    /// file never reaches the roll. SEMANTICS.md § Files that are not photos.
    private mutating func moveSideFile(_ file: NodeID, from oldParent: NodeID, _ oldName: Name,
                                       to newParent: NodeID, _ newPolicy: DirectoryPolicy, _ newName: Name,
                                       replacing target: NodeID?) throws {
        switch newPolicy.arrival {
        case .rollEntry, .albumEntry: break
        // Hidden/'s side files stay in it (an asset they become is hidden from the start).
        case .hide where oldParent == newParent: break
        default: throw LibraryError.notPermitted
        }
        let targetKind = try target.map { try kind(of: $0) }
        if let targetKind, targetKind.isDirectory { throw LibraryError.isDirectory }
        if Names.isSideFileName(newName) && targetKind != .asset {
            if let target { try removeSideFile(newParent, newName, target) }
            try moveEntry(oldParent, oldName, to: newParent, newName)
            try touched(oldParent)
            try touched(newParent)
            return
        }
        // It becomes an asset: first as if it had been created where it is,
        // under its new name, then the rename runs as for any asset.
        try db.setKind(file, .asset)
        // Side files are not uploaded; the asset it now is, is (SEMANTICS.md § Remote storage).
        try db.queueUpload(file)
        if oldParent == hidden {
            try moveAsset(file, from: hidden, oldName, to: hidden, newPolicy, newName, replacing: target)
            return
        }
        var sourceName = oldName
        if oldParent == roll {
            sourceName = try db.freeName(in: roll, for: newName)
            if newParent != roll || target == nil {
                try moveEntry(roll, oldName, to: roll, sourceName)
                if sourceName == newName && newParent == roll { try touched(roll); changes.node(file); return }
            } else {
                sourceName = oldName
            }
        } else {
            try db.insertEntry(roll, try db.freeName(in: roll, for: newName), file)
            // A new roll name: no cached name to drop, but the roll's listing.
            try touched(roll)
        }
        try moveAsset(file, from: oldParent, sourceName, to: newParent, newPolicy, newName, replacing: target)
    }

    // MARK: albums

    private mutating func moveAlbum(_ album: NodeID, from oldParent: NodeID, _ oldName: Name,
                                    to newParent: NodeID, _ newPolicy: DirectoryPolicy, _ newName: Name,
                                    replacing target: NodeID?) throws {
        guard newPolicy.makesAlbums else { throw LibraryError.notPermitted }
        // Not into itself or one of its own sub-albums.
        var ancestor: NodeID? = newParent
        while let current = ancestor {
            if current == album { throw LibraryError.invalidArgument }
            ancestor = try db.parent(ofDirectory: current)
        }
        if let target {
            switch try db.kind(of: target) {
            case .album:
                if try db.hasEntries(target) { throw LibraryError.notEmpty }
                try db.deleteNode(target)
            case .asset, .sideFile: throw LibraryError.notDirectory
            default: throw LibraryError.notPermitted
            }
        }
        try moveEntry(oldParent, oldName, to: newParent, newName)
        try db.setDirectoryParent(album, newParent)
        try db.touchDirectory(oldParent, now: now)
        try db.touchDirectory(newParent, now: now)
        try db.touchChangeTime(album, now: now)
    }

    // MARK: asset entries, between the roll and albums

    private mutating func moveAsset(_ source: NodeID, from oldParent: NodeID, _ oldName: Name,
                                    to newParent: NodeID, _ newPolicy: DirectoryPolicy, _ newName: Name,
                                    replacing target: NodeID?) throws {
        if let target, try db.kind(of: target) != .asset { throw LibraryError.isDirectory }
        if oldParent == newParent {
            if let target {
                try update(replacing: target, with: source, in: oldParent, oldName, newName)
            } else {
                try renameEntry(of: source, in: oldParent, oldName, newName)
            }
        } else {
            try moveEntry(of: source, from: oldParent, oldName, to: newParent, newPolicy, newName, replacing: target)
        }
        try db.touchDirectory(oldParent, now: now)
        try db.touchDirectory(newParent, now: now)
        try db.touchChangeTime(source, now: now)
        // Its link count may have changed (roll → album adds a link, an update
        // hands it entries), which the kernel's rename does not account for.
        changes.node(source)
    }

    /// Same directory, free target name. In an album the roll entry follows
    /// when it carried the old name (or a `(n)` form of it), so rsync's
    /// `.x.TMP` → `x` leaves no temporary name in the roll.
    private mutating func renameEntry(of asset: NodeID, in directory: NodeID, _ oldName: Name, _ newName: Name) throws {
        try moveEntry(directory, oldName, to: directory, newName)
        if directory != roll {
            try rollFollows(asset, albumEntryWas: oldName, becomes: newName)
        }
    }

    private mutating func rollFollows(_ asset: NodeID, albumEntryWas oldName: Name, becomes newName: Name) throws {
        guard oldName != newName,
              let rollName = try db.name(of: asset, in: roll),
              Names.isSameOrNumbered(rollName, of: oldName) else { return }
        let newRollName = try db.freeName(in: roll, for: newName, owner: asset)
        guard newRollName != rollName else { return }
        try moveEntry(roll, rollName, to: roll, newRollName)
        // Only the old name can be cached; the new one was free.
        changes.entry(roll, rollName)
        changes.directory(roll)
    }

    /// Same directory, target exists: an update. `moving` takes `replaced`'s
    /// place everywhere (roll name and album entries) and becomes the asset;
    /// `replaced` is kept as its original or deleted (`supersede`).
    private mutating func update(replacing replaced: NodeID, with moving: NodeID, in directory: NodeID,
                                 _ oldName: Name, _ newName: Name) throws {
        let replacedEntries = try db.entries(of: replaced).filter { $0.directory != directory }
        let movingDirectories = Set(try db.entries(of: moving).map(\.directory))
        let movingRollName = try db.name(of: moving, in: roll)
        // Its entries change hands first, so it is deleted with none but the
        // roll's (which it keeps until deleted, to be named by it in Recently Deleted).
        for (entryDirectory, entryName) in replacedEntries where entryDirectory != roll {
            guard try db.kind(of: entryDirectory) == .album else { continue }
            try deleteEntry(entryDirectory, entryName)
            if !movingDirectories.contains(entryDirectory) {
                try db.insertEntry(entryDirectory, entryName, moving)
            }
            // Where an album held both, the moving asset keeps its own entry.
            try vanished(entryDirectory, entryName)
        }
        let replacedRollName = try db.name(of: replaced, in: roll)
        if directory != roll && directory != hidden { try deleteEntry(directory, newName) }
        // Kept as the asset's original, or to Recently Deleted (SEMANTICS.md § Edits keep the original).
        try supersede(replaced, by: moving, except: directory)
        // The rename itself.
        try moveEntry(directory, oldName, to: directory, newName)
        if directory != roll, let replacedRollName, let movingRollName {
            // The roll shows one version, under the replaced asset's name.
            try moveEntry(roll, movingRollName, to: roll, replacedRollName)
            try vanished(roll, movingRollName)
        }
    }

    /// Another directory: only the target entry is replaced.
    private mutating func moveEntry(of asset: NodeID, from oldParent: NodeID, _ oldName: Name,
                                    to newParent: NodeID, _ newPolicy: DirectoryPolicy, _ newName: Name,
                                    replacing target: NodeID?) throws {
        if newPolicy.arrival == .albumEntry, try db.name(of: asset, in: newParent) != nil {
            // The album already holds the asset under another name.
            throw LibraryError.exists
        }
        if let target {
            if newParent == roll {
                try deleteAsset(target, except: roll)
            } else {
                try deleteEntry(newParent, newName)
                // It lost a link: its ctime moves, as for unlink.
                try db.touchChangeTime(target, now: now)
                changes.node(target)
            }
        }
        let partner = try db.partner(of: asset)
        switch (oldParent == roll, newParent == roll) {
        case (true, false):
            // Roll → album: adds the asset to the album; the roll keeps it.
            try db.insertEntry(newParent, newName, asset)
            if let partner { try addPartner(partner, to: newParent) }
        case (false, true):
            // Album → roll: drops the album reference and renames the roll entry.
            try deleteEntry(oldParent, oldName)
            if let rollName = try db.name(of: asset, in: roll) {
                try moveEntry(roll, rollName, to: roll, newName)
                changes.entry(roll, rollName)
            }
            if let partner { try dropPartner(partner, from: oldParent) }
        default:
            // Album → album: moves the reference.
            try moveEntry(oldParent, oldName, to: newParent, newName)
            try rollFollows(asset, albumEntryWas: oldName, becomes: newName)
            if let partner { try movePartner(partner, from: oldParent, to: newParent) }
        }
    }
}
