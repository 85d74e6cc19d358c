import SQLiteKit

/// One change to the library, inside its transaction: the connection, the
/// store's time, who asks, and what the change did beyond the entries the
/// request names (for the kernel's caches) and which nodes lost their data
/// (freed after the commit). Every deletion, restore and purge of the library
/// runs through the methods of this type (Mutation+Delete.swift), whatever
/// operation asked for it.
struct Mutation {
    let db: Database
    let now: Nanoseconds
    let options: LibraryOptions
    let content: ContentStore
    let caller: Caller
    var changes = ChangeSet()
    /// Nodes deleted whose data the caller frees after the commit.
    var purged: [NodeID] = []
    /// Content files made in this transaction: removed if it does not commit.
    private(set) var createdContent: [NodeID] = []
    private var touchedDirectories = Set<NodeID>()
    let roll = FixedNode.cameraRoll
    let recentlyDeleted = FixedNode.recentlyDeleted
    let hidden = FixedNode.hidden

    init(db: Database, now: Nanoseconds, options: LibraryOptions, content: ContentStore, caller: Caller) {
        self.db = db
        self.now = now
        self.options = options
        self.content = content
        self.caller = caller
    }

    /// The policy of directory `id` (nil: no such directory).
    func policy(of id: NodeID) throws -> DirectoryPolicy? {
        if VirtualNode(id) != nil { return DirectoryPolicy(.computedView) }
        guard let kind = try db.kind(of: id) else { return nil }
        return DirectoryPolicy(kind)
    }

    /// The node `name` in `parent` shows, computed views included.
    mutating func child(of parent: NodeID, named name: Name) throws -> NodeID? {
        guard let view = ComputedViews.view(serving: parent) else { return try entry(of: parent, named: name) }
        switch try view.lookup(db, in: parent, name) {
        case .asset(let attributes): return attributes.id
        case .directory(let node): return node.id
        case nil: return nil
        }
    }

    /// The node of entry `name` in `parent`, a `.trashinfo` still to write
    /// included (it is written first).
    mutating func entry(of parent: NodeID, named name: Name) throws -> NodeID? {
        if let child = try db.child(of: parent, named: name) { return child }
        guard try writeUnwrittenTrashInfos(in: parent) else { return nil }
        return try db.child(of: parent, named: name)
    }

    func kind(of id: NodeID) throws -> NodeKind {
        guard let kind = try db.kind(of: id) else { throw LibraryError.notFound }
        return kind
    }

    /// A directory's entries changed (its times are written once per change).
    mutating func touched(_ directory: NodeID) throws {
        if touchedDirectories.insert(directory).inserted { try db.touchDirectory(directory, now: now) }
        changes.directory(directory)
    }

    /// An entry vanished or now shows another node: cached lookups of it are wrong.
    mutating func vanished(_ directory: NodeID, _ name: Name) throws {
        changes.entry(directory, name)
        try touched(directory)
    }

    // MARK: entries, and what the computed views show of them

    /// Removes an entry. A roll entry's name leaves the computed views with it.
    mutating func deleteEntry(_ parent: NodeID, _ name: Name) throws {
        let child = try db.deleteEntry(parent, name)
        if parent == roll, let child { try rollNameLeaves(child, name) }
    }

    /// Moves or renames an entry. A roll entry's old name leaves the computed views.
    mutating func moveEntry(_ parent: NodeID, _ name: Name, to newParent: NodeID, _ newName: Name) throws {
        let child = try db.moveEntry(parent, name, to: newParent, newName)
        if parent == roll, let child { try rollNameLeaves(child, name) }
    }

    /// The computed views show `asset` under its roll name `name`: that name
    /// is no longer right in any of them (the kernel may have it cached),
    /// nor, as it may have been the last one, the month, year or set names.
    mutating func rollNameLeaves(_ asset: NodeID, _ name: Name) throws {
        for entry in try ComputedViews.names(of: asset, rollName: name, db) { changes.entry(entry.directory, entry.name) }
    }

    /// A new node's content file. Data before the row that points at it: made
    /// inside the transaction, and removed again if the transaction does not
    /// commit (a failed COMMIT included), so no file is left for an id that
    /// may later go to a directory.
    mutating func createContent(_ id: NodeID, contents: [UInt8] = []) throws {
        createdContent.append(id)
        try content.create(id, contents: contents, modified: now)
    }

    /// Whether `album` is an album a user can reach (not inside a trashed one).
    func isLiveAlbum(_ album: NodeID) throws -> Bool {
        guard try db.kind(of: album) == .album else { return false }
        var current = try db.parent(ofDirectory: album)
        while let directory = current, directory != FixedNode.albumsRoot {
            guard try db.kind(of: directory) == .album else { return false }
            current = try db.parent(ofDirectory: directory)
        }
        return current == FixedNode.albumsRoot
    }
}

extension Library {
    /// Runs `body` as one transaction on a Mutation, frees the data of what it
    /// purged once committed, and returns its result with its ChangeSet.
    func mutate<T: Sendable>(by caller: Caller, freesSpace: Bool = true, at time: Nanoseconds? = nil,
                             _ body: (inout Mutation) throws -> T) throws(LibraryError) -> (T, ChangeSet) {
        let options = self.options
        let content = self.content
        func attempt() throws(LibraryError) -> (T, ChangeSet, [NodeID]) {
            var created: [NodeID] = []
            do {
                return try write({ db -> (T, ChangeSet, [NodeID]) in
                    try finishFreedPurges(db)
                    var mutation = Mutation(db: db, now: time ?? options.now(), options: options, content: content, caller: caller)
                    defer { created = mutation.createdContent }
                    let result = try body(&mutation)
                    return (result, mutation.changes, mutation.purged)
                }, rolledBack: {
                    // Under the lock that made them: once it is released, a
                    // new create may be handed the same id (AUTOINCREMENT
                    // rolls back too) and its file.
                    for id in created { content.remove(id) }
                })
            } catch {
                try pausePoints.reached(.changeRolledBack)
                throw error
            }
        }
        let result: (T, ChangeSet, [NodeID])
        do {
            result = try attempt()
        } catch .noSpace where freesSpace && reserve.release() {
            // A change that frees space may use the store's reserve: on a full
            // disk it is given up and the change retried once, so that a full
            // library can always be emptied.
            result = try attempt()
        }
        freeData(of: result.2)
        // A purge may owe the bucket a delete.
        if !result.2.isEmpty { wakeRemoteSync() }
        return (result.0, result.1)
    }
}
