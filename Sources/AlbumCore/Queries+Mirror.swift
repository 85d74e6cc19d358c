import SQLiteKit

/// The SQL of a second device's refresh (SEMANTICS.md § Surviving the
/// machine, "A second device"): the live database takes the rows of a store
/// recovered from a newer snapshot, attached as `next`, in one transaction
/// of the caller's, who holds the library's database lock. What the kernel
/// may have cached of the old rows is found first (`refreshChanges`).
extension Database {
    /// Tables of this machine's own state, which no snapshot carries (a
    /// recovered store has them empty, but for `evicted`: every asset).
    static let localStateTables: Set<String> = [
        "upload_queue", "uploads_under_way", "remote_status", "unfinished_writes", "evicted", "kept_local", "snapshot_status",
    ]

    func attachNext(_ path: String) throws {
        try statement("ATTACH DATABASE ?1 AS next").bind(.text(path)).run()
    }

    func detachNext() throws {
        try execute("DETACH DATABASE next")
    }

    /// Whether `next` has this database's schema, table for table and index
    /// for index, and its version (a writer on a newer albumfs may have another).
    func nextHasSameSchema() throws -> Bool {
        func schema(_ database: String) throws -> [String] {
            try statement("""
                SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM \(database).sqlite_schema
                WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name
                """).all { $0.text(0) }
        }
        return try schema("main") == schema("next")
            && scalarInt("PRAGMA main.user_version") == scalarInt("PRAGMA next.user_version")
    }

    /// What the kernel may hold of the rows that `next` changes: names
    /// that vanish or show another node, directories whose listing changes,
    /// nodes whose attributes change, and the assets any of it concerns
    /// (whose names in the views are the caller's to add).
    func refreshChanges() throws -> (changes: ChangeSet, assets: Set<NodeID>) {
        var changes = ChangeSet()
        var assets = Set<NodeID>()
        let entries = "SELECT parent, name, child FROM main.entries"
        let nextEntries = "SELECT parent, name, child FROM next.entries"
        for row in try statement("SELECT parent, name, child FROM (\(entries) EXCEPT \(nextEntries))")
            .all({ (NodeID(bitPattern: $0.int64(0)), $0.blob(1), NodeID(bitPattern: $0.int64(2))) }) {
            changes.entry(row.0, row.1)
            changes.directory(row.0)
            changes.node(row.2)
            assets.insert(row.2)
        }
        for row in try statement("SELECT parent, child FROM (\(nextEntries) EXCEPT \(entries))")
            .all({ (NodeID(bitPattern: $0.int64(0)), NodeID(bitPattern: $0.int64(1))) }) {
            changes.directory(row.0)
            changes.node(row.1)
            assets.insert(row.1)
        }
        for id in try statement("""
            SELECT id FROM (SELECT * FROM main.nodes EXCEPT SELECT * FROM next.nodes)
            UNION SELECT id FROM (SELECT * FROM next.nodes EXCEPT SELECT * FROM main.nodes)
            """).all({ NodeID(bitPattern: $0.int64(0)) }) {
            changes.node(id)
            assets.insert(id)
        }
        // Every other table of the snapshot that says something of an asset (its
        // facts, favorite, pair, original, object, Recently Deleted row).
        for table in try tablesWithAssetColumn() {
            let quoted = "\"\(table)\""   // (our own tables: plain identifiers)
            for id in try statement("""
                SELECT asset FROM (SELECT * FROM main.\(quoted) EXCEPT SELECT * FROM next.\(quoted))
                UNION SELECT asset FROM (SELECT * FROM next.\(quoted) EXCEPT SELECT * FROM main.\(quoted))
                """).all({ NodeID(bitPattern: $0.int64(0)) }) {
                changes.node(id)
                assets.insert(id)
            }
        }
        return (changes, assets.filter { $0 > 0 })
    }

    /// The snapshot's tables with an `asset` column, but this machine's own state.
    private func tablesWithAssetColumn() throws -> [String] {
        try statement("""
            SELECT s.name FROM next.sqlite_schema s
            WHERE s.type = 'table' AND s.name NOT LIKE 'sqlite_%'
              AND EXISTS (SELECT 1 FROM pragma_table_info(s.name, 'next') c WHERE c.name = 'asset')
            ORDER BY s.name
            """).all { $0.text(0) }.filter { !Self.localStateTables.contains($0) && !Self.tablesNotSnapshotted.contains($0) }
    }

    /// Assets whose data this machine has (not evicted) and that `next`
    /// records with the same object: their cached originals stay.
    func cachedOriginalsStillValid() throws -> Set<NodeID> {
        Set(try statement("""
            SELECT r.asset FROM main.remote_objects r JOIN next.remote_objects n ON n.asset = r.asset AND n.sha256 = r.sha256
            WHERE NOT EXISTS (SELECT 1 FROM main.evicted e WHERE e.asset = r.asset)
            """).all { NodeID(bitPattern: $0.int64(0)) })
    }

    /// Assets whose data this machine has (not evicted).
    func cachedOriginals() throws -> Set<NodeID> {
        Set(try statement("""
            SELECT asset FROM main.remote_objects r WHERE NOT EXISTS (SELECT 1 FROM main.evicted e WHERE e.asset = r.asset)
            """).all { NodeID(bitPattern: $0.int64(0)) })
    }

    /// Every table's rows become `next`'s (its sequences too), in the
    /// caller's transaction; `keep` stay local (not evicted). Foreign keys
    /// are checked at the commit: the rows go out first, then come in.
    func takeRowsOfNext(keepingLocal keep: Set<NodeID>) throws {
        try execute("PRAGMA defer_foreign_keys = ON")
        var tables = try statement("""
            SELECT name FROM next.sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name
            """).all { $0.text(0) }
        if try scalarInt("SELECT count(*) FROM next.sqlite_schema WHERE name = 'sqlite_sequence'") == 1 {
            tables.append("sqlite_sequence")
        }
        for table in tables { try statement("DELETE FROM main.\"\(table)\"").run() }
        for table in tables { try statement("INSERT INTO main.\"\(table)\" SELECT * FROM next.\"\(table)\"").run() }
        for id in keep { try unmarkEvicted(id) }
    }
}
