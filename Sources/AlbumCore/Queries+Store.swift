import SQLiteKit

/// The SQL of the store as a whole: how a connection is set up, what the
/// opener checks, the fixed nodes of a new store, and fsck's passes over
/// every row. Callers hold the library's database lock (or own the
/// connection: the opener, fsck).
extension Database {
    // MARK: the connection

    /// Foreign keys, before anything is read.
    func enforceForeignKeys() throws {
        try execute("PRAGMA foreign_keys = ON")
    }

    /// WAL + NORMAL: a commit survives a killed daemon; fsync() syncs the WAL
    /// explicitly to survive a power loss. A checkpoint runs inside the
    /// commit that takes the WAL past `checkpointPages` and waits for two
    /// fsyncs there: 10,000 pages (a WAL of up to 40 MiB) instead of
    /// SQLite's 1,000 makes that a tenth as often (docs/PERFORMANCE.md).
    func useWriteAheadLog(checkpointPages: Int = 10_000) throws {
        _ = try statement("PRAGMA journal_mode = WAL").first { $0.text(0) }
        try execute("PRAGMA synchronous = NORMAL")
        try execute("PRAGMA wal_autocheckpoint = \(checkpointPages)")
    }

    /// Reads the schema: fails at once on a file that is not a database.
    func readSchema() throws {
        _ = try scalarInt("SELECT count(*) FROM sqlite_master")
    }

    /// Whether any asset is listed (a store whose content directory is missing must not mount empty).
    func hasAssets() throws -> Bool {
        try scalarInt("SELECT EXISTS (SELECT 1 FROM nodes WHERE kind = \(NodeKind.asset.rawValue))") != 0
    }

    // MARK: a new store

    /// A fixed directory of a new store (its id chosen, 0755, owned by
    /// `owner`), and its entry in `parent` when it has a name (the root has none).
    func insertFixedDirectory(_ id: NodeID, kind: NodeKind, parent: NodeID, name: Name?, mode: UInt32,
                              owner: Caller, now: Nanoseconds) throws {
        try statement("""
            INSERT INTO nodes(id, kind, parent, mode, uid, gid, atime, mtime, ctime, imported)
            VALUES (?1, ?2, ?3, ?7, ?4, ?5, ?6, ?6, ?6, ?6)
            """).bind(.int(id), .int(kind.rawValue), name == nil ? .null : .int(parent),
                       .int(owner.uid), .int(owner.gid), .int(now), .int(Int64(mode))).run()
        if let name { try insertEntry(parent, name, id) }
    }

    /// A fixed directory added to an existing store, owned (and timed) like its root.
    func insertDirectoryOwnedLikeTheRoot(_ id: NodeID, kind: NodeKind, parent: NodeID, name: Name) throws {
        try statement("""
            INSERT INTO nodes(id, kind, parent, mode, uid, gid, atime, mtime, ctime, imported)
            SELECT ?1, ?2, ?3, 493, uid, gid, atime, mtime, ctime, imported FROM nodes WHERE id = \(FixedNode.root)
            """).bind(.int(id), .int(kind.rawValue), .int(parent)).run()
        try insertEntry(parent, name, id)
    }

    /// User nodes are numbered from `id` + 1 on.
    func reserveNodeIDs(through id: NodeID) throws {
        try statement("UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'nodes'").bind(.int(id)).run()
    }

    /// Whether the library holds any asset or album (a store to generate into must hold none).
    func hasAssetsOrAlbums() throws -> Bool {
        try scalarInt("SELECT EXISTS (SELECT 1 FROM nodes WHERE kind IN (\(NodeKind.asset.rawValue), \(NodeKind.album.rawValue)))") != 0
    }

    /// Forgets every asset's facts (a benchmark's cold read of them all).
    func forgetAllFacts() throws {
        try execute("DELETE FROM asset_facts")
    }

    // MARK: fsck

    /// SQLite's own check: "ok", or what is wrong.
    func quickCheck() throws -> [String] {
        try statement("PRAGMA quick_check").all { $0.text(0) }
    }

    /// Every node with data: (id, size, whether it is a side file).
    func nodesWithData() throws -> [(id: NodeID, size: Int64, isSideFile: Bool)] {
        try statement("""
            SELECT id, size, kind FROM nodes WHERE kind IN (\(NodeKind.asset.rawValue), \(NodeKind.sideFile.rawValue))
            """).all { (NodeID(bitPattern: $0.int64(0)), $0.int64(1), $0.int(2) == NodeKind.sideFile.rawValue) }
    }

    /// Every asset listed as deleted.
    func deletedAssetIDs() throws -> [NodeID] {
        try statement("SELECT asset FROM deleted_assets").all { NodeID(bitPattern: $0.int64(0)) }
    }

    /// Entries whose node does not exist: (directory, node).
    func danglingEntries() throws -> [(parent: NodeID, child: NodeID)] {
        try statement("""
            SELECT e.parent, e.child FROM entries e LEFT JOIN nodes n ON n.id = e.child WHERE n.id IS NULL
            """).all { (NodeID(bitPattern: $0.int64(0)), NodeID(bitPattern: $0.int64(1))) }
    }

    /// The node of every entry of `directory`, once per entry.
    func childIDs(of directory: NodeID) throws -> [NodeID] {
        try statement("SELECT child FROM entries WHERE parent = ?1").bind(.int(directory)).all { NodeID(bitPattern: $0.int64(0)) }
    }

    /// Removes every entry of `directory` that names `child`.
    func deleteEntries(in directory: NodeID, naming child: NodeID) throws {
        try statement("DELETE FROM entries WHERE parent = ?1 AND child = ?2").bind(.int(directory), .int(child)).run()
    }
}
