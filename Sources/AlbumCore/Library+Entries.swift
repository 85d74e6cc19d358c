import SQLiteKit

/// Creating and removing entries: files, links, albums.
extension Library {
    /// A new, empty asset named `name` in the roll or in an album. In an album
    /// this is one transaction: the asset, its roll entry (`name`, or its first
    /// free `(n)` form) and its album entry.
    public func createAsset(in parent: NodeID, named name: Name, mode: UInt32, by caller: Caller) throws(LibraryError) -> (Attributes, ChangeSet) {
        try Names.validate(name)
        let content = self.content
        // A content file made for a transaction that then failed (a COMMIT
        // on a full disk) is removed: its id may go to an album next.
        var made: NodeID?
        defer { if let made { content.remove(made) } }
        let result = try write { db -> (Attributes, ChangeSet) in
            let parentKind = try db.kind(of: parent)
            guard parentKind == .cameraRoll || parentKind == .album else {
                throw parentKind == nil ? LibraryError.notFound : LibraryError.notPermitted
            }
            if try db.child(of: parent, named: name) != nil { throw LibraryError.exists }
            let now = currentTime()
            let id = try db.insertNode(kind: .asset, parent: nil, mode: mode, owner: caller, now: now)
            try db.beginWrite(id)
            var changes = ChangeSet()
            if parent == FixedNode.cameraRoll {
                try db.insertEntry(parent, name, id)
            } else {
                let rollName = try db.freeName(in: FixedNode.cameraRoll, for: name)
                try db.insertEntry(FixedNode.cameraRoll, rollName, id)
                try db.insertEntry(parent, name, id)
                try db.touchDirectory(FixedNode.cameraRoll, now: now)
                // The roll's listing changed; its new name needs no name
                // invalidation: it was free, and "no such name" is never cached.
                changes.directory(FixedNode.cameraRoll)
            }
            try db.touchDirectory(parent, now: now)
            // Data before the row that points at it: created inside the
            // transaction, so a failure here commits nothing, and a crash
            // before the commit leaves a file for an id the next mount's
            // clean-up (or the next create, which reuses the id) takes back.
            try content.create(id)
            made = id
            try pausePoints.reached(.createBeforeCommit)
            guard let attributes = try db.attributes(of: id) else { throw LibraryError.io(5) }
            return (attributes, changes)
        }
        made = nil
        return result
    }

    /// A new album in `Albums/` or in another album.
    public func makeAlbum(in parent: NodeID, named name: Name, mode: UInt32, by caller: Caller) throws(LibraryError) -> Attributes {
        try Names.validate(name)
        return try write { db in
            let parentKind = try db.kind(of: parent)
            guard let parentKind else { throw LibraryError.notFound }
            guard parentKind.holdsAlbums else { throw LibraryError.notPermitted }
            if try db.child(of: parent, named: name) != nil { throw LibraryError.exists }
            let now = currentTime()
            let id = try db.insertNode(kind: .album, parent: parent, mode: mode, owner: caller, now: now)
            try db.insertEntry(parent, name, id)
            try db.touchDirectory(parent, now: now)
            guard let attributes = try db.attributes(of: id) else { throw LibraryError.io(5) }
            return attributes
        }
    }

    /// Adds an existing asset to an album under `name` (`ln`). No data is copied.
    public func link(_ asset: NodeID, into parent: NodeID, named name: Name) throws(LibraryError) -> Attributes {
        try Names.validate(name)
        return try write { db in
            guard try db.kind(of: asset) == .asset else { throw LibraryError.notPermitted }
            switch try db.kind(of: parent) {
            case nil: throw LibraryError.notFound
            case .cameraRoll: throw LibraryError.exists  // every asset is already there
            case .album: break
            default: throw LibraryError.notPermitted
            }
            if try db.name(of: asset, in: parent) != nil { throw LibraryError.exists }
            if try db.child(of: parent, named: name) != nil { throw LibraryError.exists }
            let now = currentTime()
            try db.insertEntry(parent, name, asset)
            try db.touchDirectory(parent, now: now)
            try db.touchChangeTime(asset, now: now)
            guard let attributes = try db.attributes(of: asset) else { throw LibraryError.io(5) }
            return attributes
        }
    }

    /// `unlink`: in an album, drops that reference; in the roll, deletes the
    /// asset from the roll and every album at once and frees its data.
    public func unlink(_ parent: NodeID, _ name: Name) throws(LibraryError) -> ChangeSet {
        let (changes, purged) = try write(freesSpace: true) { db -> (ChangeSet, NodeID?) in
            guard let child = try db.child(of: parent, named: name) else { throw LibraryError.notFound }
            guard try db.kind(of: child) == .asset else { throw LibraryError.isDirectory }
            let now = currentTime()
            var changes = ChangeSet()
            switch try db.kind(of: parent) {
            case .cameraRoll:
                changes.merge(try Self.deleteAsset(child, db: db, now: now, except: parent))
                try db.touchDirectory(parent, now: now)
                return (changes, child)
            case .album:
                try db.deleteEntry(parent, name)
                try db.touchDirectory(parent, now: now)
                try db.touchChangeTime(child, now: now)
                changes.node(child)
                return (changes, nil)
            default:
                throw LibraryError.notPermitted
            }
        }
        if let purged { freeData(of: [purged]) }
        return changes
    }

    /// Deletes an asset's node, entries and attributes and schedules its data
    /// to be freed (`freeData`, after the commit). Reports every entry that
    /// vanished outside `except`.
    static func deleteAsset(_ id: NodeID, db: Database, now: Nanoseconds, except: NodeID) throws -> ChangeSet {
        var changes = ChangeSet()
        for (directory, entryName) in try db.entries(of: id) where directory != except {
            try db.touchDirectory(directory, now: now)
            changes.entry(directory, entryName)
            changes.directory(directory)
        }
        changes.node(id)
        try db.deleteNode(id)
        try db.schedulePurge(id)
        return changes
    }

    /// Frees the data of assets whose deletion has committed. A failure here
    /// loses nothing: the purge stays pending and the next mount retries it.
    func freeData(of ids: [NodeID]) {
        guard !ids.isEmpty else { return }
        for id in ids { content.remove(id) }
        _ = try? write(freesSpace: true) { db in
            for id in ids { try db.purgeDone(id) }
        }
        reserve.take()
    }

    /// `rmdir`: removes an empty album. Fixed directories cannot be removed.
    public func removeAlbum(_ parent: NodeID, _ name: Name) throws(LibraryError) {
        try write(freesSpace: true) { db in
            guard let child = try db.child(of: parent, named: name) else { throw LibraryError.notFound }
            switch try db.kind(of: child) {
            case .album: break
            case .asset: throw LibraryError.notDirectory
            default: throw LibraryError.notPermitted
            }
            if try db.hasEntries(child) { throw LibraryError.notEmpty }
            try db.deleteNode(child)
            try db.touchDirectory(parent, now: currentTime())
        }
    }
}
