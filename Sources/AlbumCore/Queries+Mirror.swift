import SQLiteKit

/// The SQL of a second device's refresh (SEMANTICS.md § Surviving the
/// machine, "A second device"): a connection of the refresh's own, with a
/// store recovered from a newer snapshot attached as `next`, finds what
/// the kernel may have cached of the live rows that `next` changes
/// (`refreshChanges`); the live connection then takes `next`'s pages
/// (`Database.replaceContents`) and keeps its cached originals.
extension Database {
    /// Tables of this machine's own state, which a recovered store empties
    /// (adoptRecoveredSnapshot) and a refresh does not compare.
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
    /// nodes whose attributes change, and the nodes any of it concerns
    /// (the names the views show of those that are assets are the caller's to add).
    func refreshChanges() throws -> (changes: ChangeSet, touched: Set<NodeID>) {
        var changes = ChangeSet()
        var touched = Set<NodeID>()
        let entries = "SELECT parent, name, child FROM main.entries"
        let nextEntries = "SELECT parent, name, child FROM next.entries"
        for row in try statement("SELECT parent, name, child FROM (\(entries) EXCEPT \(nextEntries))")
            .all({ (NodeID(bitPattern: $0.int64(0)), $0.blob(1), NodeID(bitPattern: $0.int64(2))) }) {
            changes.entry(row.0, row.1)
            changes.directory(row.0)
            changes.node(row.2)
            touched.insert(row.2)
        }
        for row in try statement("SELECT parent, child FROM (\(nextEntries) EXCEPT \(entries))")
            .all({ (NodeID(bitPattern: $0.int64(0)), NodeID(bitPattern: $0.int64(1))) }) {
            changes.directory(row.0)
            changes.node(row.1)
            touched.insert(row.1)
        }
        for id in try statement("""
            SELECT id FROM (SELECT * FROM main.nodes EXCEPT SELECT * FROM next.nodes)
            UNION SELECT id FROM (SELECT * FROM next.nodes EXCEPT SELECT * FROM main.nodes)
            """).all({ NodeID(bitPattern: $0.int64(0)) }) {
            changes.node(id)
            touched.insert(id)
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
                touched.insert(id)
            }
        }
        return (changes, touched)
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

    /// The thumbnails here whose picture `next` records in the bucket too
    /// go into `next` (a refresh does not fetch them again).
    func keepThumbnailsInNext() throws {
        try execute("""
            INSERT OR IGNORE INTO next.thumbnails(asset, png)
            SELECT t.asset, t.png FROM main.thumbnails t
            JOIN main.remote_objects o ON o.asset = t.asset
            JOIN next.remote_objects n ON n.asset = t.asset AND n.sha256 = o.sha256 AND n.thumbnail_sha256 IS o.thumbnail_sha256
            WHERE n.thumbnail_sha256 IS NOT NULL AND EXISTS (SELECT 1 FROM next.asset_facts f WHERE f.asset = t.asset)
            """)
    }

    /// The assets whose data this machine has (not evicted), with their objects.
    func cachedOriginals() throws -> [(asset: NodeID, sha256: String)] {
        try statement("""
            SELECT asset, sha256 FROM remote_objects r WHERE NOT EXISTS (SELECT 1 FROM evicted e WHERE e.asset = r.asset)
            """).all { (NodeID(bitPattern: $0.int64(0)), $0.text(1)) }
    }
}
