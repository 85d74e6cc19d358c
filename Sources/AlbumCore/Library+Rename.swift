import SQLiteKit

/// rename(2), as SEMANTICS.md's table says. One transaction per call; every
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
                       flags: RenameFlags = []) throws(LibraryError) -> ChangeSet {
        if flags.contains(.exchange) { throw .invalidArgument }
        try Names.validate(newName)
        let (changes, purged) = try write(freesSpace: true) { db -> (ChangeSet, [NodeID]) in
            var move = RenameTransaction(db: db, now: currentTime())
            try move.run(oldParent, oldName, to: newParent, newName, noReplace: flags.contains(.noReplace))
            return (move.changes, move.purged)
        }
        freeData(of: purged)
        return changes
    }
}

/// One rename's work inside its transaction.
struct RenameTransaction {
    let db: Database
    let now: Nanoseconds
    var changes = ChangeSet()
    /// Assets deleted whose data the caller frees after the commit.
    var purged: [NodeID] = []
    private let roll = FixedNode.cameraRoll

    init(db: Database, now: Nanoseconds) {
        self.db = db
        self.now = now
    }

    mutating func run(_ oldParent: NodeID, _ oldName: Name, to newParent: NodeID, _ newName: Name, noReplace: Bool) throws {
        guard let source = try db.child(of: oldParent, named: oldName),
              let sourceKind = try db.kind(of: source) else { throw LibraryError.notFound }
        guard let newParentKind = try db.kind(of: newParent) else { throw LibraryError.notFound }
        let target = try db.child(of: newParent, named: newName)
        // Two names of one file: rename(2) does nothing.
        if target == source { return }
        if target != nil && noReplace { throw LibraryError.exists }
        if sourceKind.isFixed { throw LibraryError.notPermitted }

        if sourceKind == .album {
            try moveAlbum(source, from: oldParent, oldName, to: newParent, newParentKind, newName, replacing: target)
            return
        }
        let oldParentKind = try db.kind(of: oldParent)
        guard oldParentKind == .cameraRoll || oldParentKind == .album,
              newParentKind == .cameraRoll || newParentKind == .album else { throw LibraryError.notPermitted }
        if let target, try db.kind(of: target) != .asset { throw LibraryError.isDirectory }

        if oldParent == newParent {
            if let target {
                try update(replacing: target, with: source, in: oldParent, oldName, newName)
            } else {
                try renameEntry(of: source, in: oldParent, oldName, newName)
            }
        } else {
            try moveEntry(of: source, from: oldParent, oldName, to: newParent, newParentKind, newName, replacing: target)
        }
        try db.touchDirectory(oldParent, now: now)
        try db.touchDirectory(newParent, now: now)
        try db.touchChangeTime(source, now: now)
        // Its link count may have changed (roll → album adds a link, an update
        // hands it entries), which the kernel's rename does not account for.
        changes.node(source)
    }

    // MARK: albums

    private mutating func moveAlbum(_ album: NodeID, from oldParent: NodeID, _ oldName: Name,
                                    to newParent: NodeID, _ newParentKind: NodeKind, _ newName: Name,
                                    replacing target: NodeID?) throws {
        guard newParentKind.holdsAlbums else { throw LibraryError.notPermitted }
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
            case .asset: throw LibraryError.notDirectory
            default: throw LibraryError.notPermitted
            }
        }
        try db.moveEntry(oldParent, oldName, to: newParent, newName)
        try db.setDirectoryParent(album, newParent)
        try db.touchDirectory(oldParent, now: now)
        try db.touchDirectory(newParent, now: now)
        try db.touchChangeTime(album, now: now)
    }

    // MARK: asset entries

    /// Same directory, free target name. In an album the roll entry follows
    /// when it carried the old name (or a `(n)` form of it), so rsync's
    /// `.x.TMP` → `x` leaves no temporary name in the roll.
    private mutating func renameEntry(of asset: NodeID, in directory: NodeID, _ oldName: Name, _ newName: Name) throws {
        try db.moveEntry(directory, oldName, to: directory, newName)
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
        try db.moveEntry(roll, rollName, to: roll, newRollName)
        // Only the old name can be cached; the new one was free.
        changes.entry(roll, rollName)
        changes.directory(roll)
    }

    /// Same directory, target exists: an update. `moving` takes `replaced`'s
    /// place everywhere (roll name and album entries); `replaced` is deleted.
    private mutating func update(replacing replaced: NodeID, with moving: NodeID, in directory: NodeID,
                                 _ oldName: Name, _ newName: Name) throws {
        let replacedEntries = try db.entries(of: replaced)
        let movingDirectories = Set(try db.entries(of: moving).map(\.directory))
        let movingRollName = try db.name(of: moving, in: roll)
        try db.deleteNode(replaced)
        try db.schedulePurge(replaced)
        changes.node(replaced)
        purged.append(replaced)

        // The rename itself.
        try db.moveEntry(directory, oldName, to: directory, newName)
        for (entryDirectory, entryName) in replacedEntries where entryDirectory != directory {
            if entryDirectory == roll {
                // The roll shows one version, under the replaced asset's name.
                if let movingRollName {
                    try db.moveEntry(roll, movingRollName, to: roll, entryName)
                    changes.entry(roll, movingRollName)
                }
            } else if !movingDirectories.contains(entryDirectory) {
                try db.insertEntry(entryDirectory, entryName, moving)
            }
            // Where an album held both, the moving asset keeps its own entry.
            changes.entry(entryDirectory, entryName)
            changes.directory(entryDirectory)
            try db.touchDirectory(entryDirectory, now: now)
        }
    }

    /// Another directory: only the target entry is replaced.
    private mutating func moveEntry(of asset: NodeID, from oldParent: NodeID, _ oldName: Name,
                                    to newParent: NodeID, _ newParentKind: NodeKind, _ newName: Name,
                                    replacing target: NodeID?) throws {
        if newParentKind == .album, try db.name(of: asset, in: newParent) != nil {
            // The album already holds the asset under another name.
            throw LibraryError.exists
        }
        if let target {
            if newParent == roll {
                changes.merge(try Library.deleteAsset(target, db: db, now: now, except: roll))
                purged.append(target)
            } else {
                try db.deleteEntry(newParent, newName)
                // It lost a link: its ctime moves, as for unlink.
                try db.touchChangeTime(target, now: now)
                changes.node(target)
            }
        }
        switch (oldParent == roll, newParent == roll) {
        case (true, false):
            // Roll → album: adds the asset to the album; the roll keeps it.
            try db.insertEntry(newParent, newName, asset)
        case (false, true):
            // Album → roll: drops the album reference and renames the roll entry.
            try db.deleteEntry(oldParent, oldName)
            if let rollName = try db.name(of: asset, in: roll) {
                try db.moveEntry(roll, rollName, to: roll, newName)
                changes.entry(roll, rollName)
            }
        default:
            // Album → album: moves the reference.
            try db.moveEntry(oldParent, oldName, to: newParent, newName)
            try rollFollows(asset, albumEntryWas: oldName, becomes: newName)
        }
    }
}
