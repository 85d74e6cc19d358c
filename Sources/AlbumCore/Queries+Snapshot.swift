import SQLiteKit

/// The SQL of the metadata's snapshots and of a recovery from them
/// (SEMANTICS.md § Surviving the machine). Callers hold the library's
/// database lock, except for `writeSnapshot`, which runs on a connection of
/// its own.
extension Database {
    // MARK: taking a snapshot

    /// Tables a snapshot leaves empty: what is remade from the originals
    /// (a thumbnail is a few KiB a photo: most of a large library's database).
    static let tablesNotSnapshotted: Set<String> = ["thumbnails"]

    /// Writes the database at `livePath` into `encoder` (SnapshotFormat):
    /// every table's and index's SQL, every table's rows (but
    /// `tablesNotSnapshotted`'s) and the sequences, and the schema version,
    /// read in one transaction on a connection of its own (a consistent
    /// state; the live connection never waits for it). `copying` runs inside
    /// the transaction, once the schema is read (a pause point).
    static func writeSnapshot(of livePath: String, into encoder: inout SnapshotEncoder, copying: () throws -> Void = {}) throws {
        let live = try Database(path: livePath, mode: .readWrite)
        live.setBusyTimeout(milliseconds: 10_000)
        // DEFERRED: a read transaction, begun by its first read; writers go on.
        try live.execute("BEGIN DEFERRED")
        defer { try? live.execute("ROLLBACK") }
        let schema = try live.statement("""
            SELECT type, name, sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'
            ORDER BY CASE type WHEN 'table' THEN 0 ELSE 1 END, rowid
            """).all { ($0.text(0), $0.text(1), $0.text(2)) }
        try copying()
        for (type, name, sql) in schema {
            try encoder.record(.schema)
            encoder.string(type.utf8)
            encoder.string(name.utf8)
            encoder.string(sql.utf8)
        }
        var tables = schema.filter { $0.0 == "table" && !tablesNotSnapshotted.contains($0.1) }.map(\.1)
        if try live.scalarInt("SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_sequence'") == 1 {
            tables.append("sqlite_sequence")
        }
        for name in tables {
            let rows = try live.statement("SELECT * FROM \"\(name)\"")   // (our own tables: plain identifiers)
            defer { rows.reset() }
            try encoder.record(.table)
            encoder.string(name.utf8)
            encoder.unsigned(UInt64(rows.columnCount))
            while try rows.step() {
                try encoder.record(.row)
                for column in 0..<rows.columnCount { encoder.value(rows.value(column)) }
            }
            try encoder.record(.tableEnd)
        }
        try encoder.record(.userVersion)
        encoder.int64(try live.scalarInt("PRAGMA user_version"))
        try encoder.finish()
    }

    /// Builds a new database at `target` from a snapshot's rows: the tables,
    /// their rows, then the indexes (built once, over all of them), the
    /// sequences and the schema version, in one transaction.
    /// How far a rebuild is, for its progress: rows inserted so far, or
    /// indexes built of all.
    enum RebuildProgress { case rows(Int), indexes(built: Int, of: Int) }

    /// `progress` is told every 65,536 rows, then before each index.
    static func rebuild(from decoder: inout SnapshotDecoder, into target: String, progress: (RebuildProgress) -> Void = { _ in }) throws {
        let copy = try Database(path: target, mode: .readWriteCreate)
        try copy.execute("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; BEGIN")
        var indexes: [String] = []
        var done = false
        var rowCount = 0
        while !done {
            switch try decoder.record() {
            case .schema:
                let type = try decoder.text(), _ = try decoder.text(), sql = try decoder.text()
                // Only what albumfs's schema holds, one statement each (prepared: any
                // text after the first statement is never run), whatever the bucket says.
                let creates = type == "table" ? ["CREATE TABLE "] : ["CREATE INDEX ", "CREATE UNIQUE INDEX "]
                guard type == "table" || type == "index", creates.contains(where: sql.hasPrefix) else {
                    throw SnapshotFormat.Corrupt(description: "a schema entry that is not a table or an index")
                }
                if type == "table" { try copy.statement(sql).run() } else { indexes.append(sql) }
            case .table:
                let name = try decoder.text()
                let columns = Int32(try decoder.unsigned())
                guard columns > 0, columns < 1000, !name.contains("\"") else {
                    throw SnapshotFormat.Corrupt(description: "a table \(name) of \(columns) columns")
                }
                if name == "sqlite_sequence" { try copy.execute("DELETE FROM sqlite_sequence") }
                let insert = try copy.statement("INSERT INTO \"\(name)\" VALUES (\(Array(repeating: "?", count: Int(columns)).joined(separator: ",")))")
                rows: while true {
                    switch try decoder.record() {
                    case .row:
                        for column in 1...columns { try insert.bind(try decoder.value(), at: column) }
                        _ = try insert.step()
                        insert.reset()
                        rowCount += 1
                        if rowCount & 0xFFFF == 0 { progress(.rows(rowCount)) }
                    case .tableEnd: break rows
                    default: throw SnapshotFormat.Corrupt(description: "a record out of place in \(name)")
                    }
                }
            case .userVersion:
                try copy.execute("PRAGMA user_version = \(try decoder.int64())")
            case .end:
                try decoder.finish()
                done = true
            case .row, .tableEnd:
                throw SnapshotFormat.Corrupt(description: "a row outside a table")
            }
        }
        for (built, sql) in indexes.enumerated() {
            progress(.indexes(built: built, of: indexes.count))
            try copy.statement(sql).run()
        }
        try copy.execute("COMMIT")
    }

    /// Whether the last mount ended with every change in a snapshot; cleared
    /// (a read-write open begins: what it changes is in none yet).
    func takeSnapshotSaved() throws -> Bool {
        let saved = try statement("SELECT saved FROM snapshot_status WHERE id = 1").first { $0.int64(0) != 0 } ?? false
        if saved { try statement("UPDATE snapshot_status SET saved = 0 WHERE id = 1").run() }
        return saved
    }

    /// Every change is in the bucket's newest snapshot (the end of a mount).
    func setSnapshotSaved() throws {
        try statement("INSERT OR REPLACE INTO snapshot_status(id, saved) VALUES (1, 1)").run()
    }

    // MARK: companions

    /// What a companion says of `asset` besides its content: its name in
    /// the roll, the paths of the albums it is in, whether it is a favorite,
    /// its mode and times. Nil: it is not a live asset (deleted, or gone).
    func companionFields(of asset: NodeID) throws -> (rollName: Name, albums: [[Name]], favorite: Bool, attributes: Attributes)? {
        guard let attributes = try attributes(of: asset), attributes.kind == .asset else { return nil }
        var rollName: Name?
        var albums: [[Name]] = []
        for (directory, name) in try entries(of: asset) {
            if directory == FixedNode.cameraRoll { rollName = name; continue }
            guard try kind(of: directory) == .album, var path = try albumPath(directory) else { continue }
            path.append(name)
            albums.append(path)
        }
        guard let rollName else { return nil }
        return (rollName, albums, try isFavorite(asset), attributes)
    }

    /// The names from under Albums/ down to `album` (nil: not under Albums/).
    func albumPath(_ album: NodeID) throws -> [Name]? {
        var names: [Name] = []
        var id = album
        for _ in 0..<4096 {
            if id == FixedNode.albumsRoot { return names.reversed() }
            guard try kind(of: id) == .album, let parent = try parent(ofDirectory: id), let name = try name(of: id, in: parent) else { return nil }
            names.append(name)
            id = parent
        }
        return nil
    }

    /// A purged asset's companion is owed a delete (with a remote only).
    func queueCompanionDelete(_ asset: NodeID) throws {
        try statement("INSERT OR IGNORE INTO companion_deletes(asset) SELECT ?1 WHERE EXISTS (SELECT 1 FROM remote)")
            .bind(.int(asset)).run()
    }

    func nextCompanionDelete() throws -> NodeID? {
        try statement("SELECT asset FROM companion_deletes ORDER BY asset LIMIT 1").first { NodeID(bitPattern: $0.int64(0)) }
    }

    func companionDeleteDone(_ asset: NodeID) throws {
        try statement("DELETE FROM companion_deletes WHERE asset = ?1").bind(.int(asset)).run()
    }

    // MARK: a recovered store

    /// Makes a snapshot's database this machine's: nothing is local, nothing
    /// is being written or uploaded; every asset the bucket holds the data
    /// of is remote-only (one whose newest data never reached it comes back
    /// with the data the bucket has: that content's size and time).
    func adoptRecoveredSnapshot() throws {
        for table in Self.localStateTables.sorted() { try statement("DELETE FROM \"\(table)\"").run() }
        try execute("""
            UPDATE nodes SET size = (SELECT size FROM remote_objects r WHERE r.asset = nodes.id),
                             mtime = (SELECT data_mtime FROM remote_objects r WHERE r.asset = nodes.id)
            WHERE kind = \(NodeKind.asset.rawValue) AND EXISTS (SELECT 1 FROM remote_objects r WHERE r.asset = nodes.id
                AND (r.size != nodes.size OR r.data_mtime != nodes.mtime))
            """)
        try execute("INSERT INTO evicted(asset) SELECT asset FROM remote_objects")
    }

    /// A recovered asset under the id it had (a companion's: newer than
    /// every node of the snapshot, and reserved beforehand).
    func insertRecoveredAsset(_ id: NodeID, mode: UInt32, owner: Caller, modified: Nanoseconds) throws {
        try statement("""
            INSERT INTO nodes(id, kind, parent, mode, uid, gid, size, atime, mtime, ctime, imported)
            VALUES (?1, ?2, NULL, ?3, ?4, ?5, 0, ?6, ?6, ?6, ?6)
            """).bind(.int(id), .int(NodeKind.asset.rawValue), .int(mode & 0o7777), .int(owner.uid), .int(owner.gid), .int(modified)).run()
    }

    /// No new node takes an id up to `id` (they are companions' ids).
    func reserveNodeIDs(atLeastThrough id: NodeID) throws {
        try statement("UPDATE sqlite_sequence SET seq = max(seq, ?1) WHERE name = 'nodes'").bind(.int(id)).run()
    }

    /// The assets whose data the bucket does not hold (after the companions).
    func assetsWithoutObjects() throws -> [NodeID] {
        try statement("""
            SELECT id FROM nodes WHERE kind = \(NodeKind.asset.rawValue) AND id NOT IN (SELECT asset FROM remote_objects)
            """).all { NodeID(bitPattern: $0.int64(0)) }
    }

    /// The album at `path` under Albums/, made (with its parents) if missing,
    /// owned by the Albums directory's owner. Nil: a name on the way is not an album.
    func recoveredAlbum(at path: ArraySlice<Name>, now: Nanoseconds) throws -> NodeID? {
        var directory = FixedNode.albumsRoot
        guard let owner = try attributes(of: FixedNode.albumsRoot) else { return nil }
        for name in path {
            if let existing = try child(of: directory, named: name) {
                guard try kind(of: existing) == .album else { return nil }
                directory = existing
                continue
            }
            let album = try insertNode(kind: .album, parent: directory, mode: 0o755, owner: Caller(uid: owner.uid, gid: owner.gid), now: now)
            try insertEntry(directory, name, album)
            try touchDirectory(directory, now: now)
            directory = album
        }
        return directory
    }
}
