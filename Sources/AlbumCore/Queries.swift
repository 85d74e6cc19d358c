import SQLiteKit

/// Every SQL statement the library runs, as small typed functions on a
/// connection. Callers hold the library's database lock.
extension Database {
    /// Attribute columns of node `n`, link count included: for an asset 1 +
    /// the albums holding it (its entries in Recently Deleted and in the
    /// trashes' files/ are other names, not links: a deleted asset has 1),
    /// for a side file 1, for a directory 2 + its sub-directories (the roll has none).
    static let attributeColumns = """
        n.id, n.kind, n.mode, n.uid, n.gid, n.size, n.atime, n.mtime, n.ctime,
        CASE n.kind
            WHEN 5 THEN max(1, (SELECT count(*) FROM entries l WHERE l.child = n.id
                AND l.parent <> \(FixedNode.recentlyDeleted) AND l.parent NOT IN (SELECT files FROM trashes)))
            WHEN 10 THEN 1
            WHEN 1 THEN 2
            ELSE 2 + (SELECT count(*) FROM nodes d WHERE d.parent = n.id)
        END,
        n.kind = 5 AND EXISTS (SELECT 1 FROM evicted v WHERE v.asset = n.id)
        """

    func attributes(of id: NodeID) throws -> Attributes? {
        let statement = try self.statement("SELECT \(Self.attributeColumns) FROM nodes n WHERE n.id = ?1")
        return try statement.bind(.int(id)).first { Self.decodeAttributes($0, from: 0) }
    }

    static func decodeAttributes(_ row: Statement, from first: Int32) -> Attributes {
        Attributes(
            id: NodeID(bitPattern: row.int64(first)),
            kind: NodeKind(rawValue: row.int(first + 1)) ?? .asset,
            mode: UInt32(truncatingIfNeeded: row.int64(first + 2)),
            uid: UInt32(truncatingIfNeeded: row.int64(first + 3)),
            gid: UInt32(truncatingIfNeeded: row.int64(first + 4)),
            size: row.int64(first + 5),
            linkCount: row.int(first + 9),
            accessTime: row.int64(first + 6),
            modificationTime: row.int64(first + 7),
            changeTime: row.int64(first + 8),
            isRemoteOnly: row.int(first + 10) != 0)
    }

    func lookup(_ parent: NodeID, _ name: Name) throws -> Attributes? {
        let statement = try self.statement("""
            SELECT \(Self.attributeColumns) FROM entries e JOIN nodes n ON n.id = e.child
            WHERE e.parent = ?1 AND e.name = ?2
            """)
        return try statement.bind(.int(parent), .blob(name)).first { Self.decodeAttributes($0, from: 0) }
    }

    /// Up to `limit` entries of `directory` whose row id is above `afterRow`, in row-id order.
    func listing(_ directory: NodeID, afterRow: Int64, limit: Int) throws -> [(row: Int64, name: Name, attributes: Attributes)] {
        let statement = try self.statement("""
            SELECT e.rowid, e.name, \(Self.attributeColumns)
            FROM entries e JOIN nodes n ON n.id = e.child
            WHERE e.parent = ?1 AND e.rowid > ?2 ORDER BY e.rowid LIMIT ?3
            """)
        try statement.bind(.int(directory), .int(afterRow), .int(limit))
        var rows: [(Int64, Name, Attributes)] = []
        while try statement.step() {
            rows.append((statement.int64(0), statement.blob(1), Self.decodeAttributes(statement, from: 2)))
        }
        return rows
    }

    func kind(of id: NodeID) throws -> NodeKind? {
        let statement = try self.statement("SELECT kind FROM nodes WHERE id = ?1")
        return try statement.bind(.int(id)).first { NodeKind(rawValue: $0.int(0)) } ?? nil
    }

    func child(of parent: NodeID, named name: Name) throws -> NodeID? {
        let statement = try self.statement("SELECT child FROM entries WHERE parent = ?1 AND name = ?2")
        return try statement.bind(.int(parent), .blob(name)).first { NodeID(bitPattern: $0.int64(0)) }
    }

    /// The name under which `directory` holds `child`, if it does.
    func name(of child: NodeID, in directory: NodeID) throws -> Name? {
        let statement = try self.statement("SELECT name FROM entries WHERE child = ?1 AND parent = ?2")
        return try statement.bind(.int(child), .int(directory)).first { $0.blob(0) }
    }

    /// Every (directory, name) that shows `child`.
    func entries(of child: NodeID) throws -> [(directory: NodeID, name: Name)] {
        let statement = try self.statement("SELECT parent, name FROM entries WHERE child = ?1")
        try statement.bind(.int(child))
        var result: [(NodeID, Name)] = []
        while try statement.step() {
            result.append((NodeID(bitPattern: statement.int64(0)), statement.blob(1)))
        }
        return result
    }

    func hasEntries(_ directory: NodeID) throws -> Bool {
        let statement = try self.statement("SELECT 1 FROM entries WHERE parent = ?1 LIMIT 1")
        return try statement.bind(.int(directory)).first { _ in true } ?? false
    }

    /// The directory that holds directory `id` (nil for the root).
    func parent(ofDirectory id: NodeID) throws -> NodeID? {
        let statement = try self.statement("SELECT parent FROM nodes WHERE id = ?1")
        return try statement.bind(.int(id)).first { $0.isNull(0) ? nil : NodeID(bitPattern: $0.int64(0)) } ?? nil
    }

    func insertNode(kind: NodeKind, parent: NodeID?, mode: UInt32, owner: Caller, now: Nanoseconds) throws -> NodeID {
        try statement("""
            INSERT INTO nodes(kind, parent, mode, uid, gid, size, atime, mtime, ctime, imported)
            VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?6, ?6, ?6)
            """).bind(.int(kind.rawValue), parent.map { .int($0) } ?? .null, .int(mode & 0o7777),
                      .int(owner.uid), .int(owner.gid), .int(now)).run()
        return NodeID(bitPattern: lastInsertedRowID)
    }

    func insertEntry(_ parent: NodeID, _ name: Name, _ child: NodeID) throws {
        try statement("INSERT INTO entries(parent, name, child) VALUES (?1, ?2, ?3)")
            .bind(.int(parent), .blob(name), .int(child)).run()
    }

    /// Removes an entry; returns the node it named (nil: there was none).
    @discardableResult
    func deleteEntry(_ parent: NodeID, _ name: Name) throws -> NodeID? {
        try statement("DELETE FROM entries WHERE parent = ?1 AND name = ?2 RETURNING child")
            .bind(.int(parent), .blob(name)).first { NodeID(bitPattern: $0.int64(0)) }
    }

    /// Moves or renames an entry, keeping its row id (and so its readdir
    /// cookie); returns the node it names (nil: there was none).
    @discardableResult
    func moveEntry(_ parent: NodeID, _ name: Name, to newParent: NodeID, _ newName: Name) throws -> NodeID? {
        try statement("UPDATE entries SET parent = ?3, name = ?4 WHERE parent = ?1 AND name = ?2 RETURNING child")
            .bind(.int(parent), .blob(name), .int(newParent), .blob(newName)).first { NodeID(bitPattern: $0.int64(0)) }
    }

    func setDirectoryParent(_ id: NodeID, _ parent: NodeID) throws {
        try statement("UPDATE nodes SET parent = ?2 WHERE id = ?1").bind(.int(id), .int(parent)).run()
    }

    /// Removes a node with its entries and extended attributes (xattrs go
    /// by their ON DELETE CASCADE: a DELETE of its own would cost a second
    /// temporary b-tree per node). An asset's facts stay until its pending
    /// purge is done (`purgeDone`), with many others: their five index
    /// entries are a quarter of a purge's writes (Empty Trash). Returns
    /// whether its data was kept in the database (a side file never opened),
    /// in which case it has no content file to free.
    @discardableResult
    func deleteNode(_ id: NodeID) throws -> Bool {
        try statement("DELETE FROM entries WHERE child = ?1").bind(.int(id)).run()
        let dataInDatabase = try statement("DELETE FROM side_file_data WHERE node = ?1 RETURNING node")
            .bind(.int(id)).first { _ in true } ?? false
        try statement("DELETE FROM favorites WHERE asset = ?1").bind(.int(id)).run()
        try statement("DELETE FROM nodes WHERE id = ?1").bind(.int(id)).run()
        return dataInDatabase
    }

    /// A directory's contents changed: its mtime and ctime become `now`.
    func touchDirectory(_ id: NodeID, now: Nanoseconds) throws {
        try statement("UPDATE nodes SET mtime = ?2, ctime = ?2 WHERE id = ?1").bind(.int(id), .int(now)).run()
    }

    func touchChangeTime(_ id: NodeID, now: Nanoseconds) throws {
        try statement("UPDATE nodes SET ctime = ?2 WHERE id = ?1").bind(.int(id), .int(now)).run()
    }

    func writeAttributes(_ a: Attributes) throws {
        try statement("""
            UPDATE nodes SET mode = ?2, uid = ?3, gid = ?4, size = ?5, atime = ?6, mtime = ?7, ctime = ?8
            WHERE id = ?1
            """).bind(.int(a.id), .int(a.mode), .int(a.uid), .int(a.gid), .int(a.size),
                      .int(a.accessTime), .int(a.modificationTime), .int(a.changeTime)).run()
    }

    func writeContentState(_ id: NodeID, size: Int64, modified: Nanoseconds, changed: Nanoseconds) throws {
        try statement("UPDATE nodes SET size = ?2, mtime = ?3, ctime = ?4 WHERE id = ?1")
            .bind(.int(id), .int(size), .int(modified), .int(changed)).run()
    }

    /// Whether the node table has no row at all (a store cut short before its
    /// fixed directories). O(1), unlike count(*), which reads every page.
    func hasNoNodes() throws -> Bool {
        try statement("SELECT NOT EXISTS (SELECT 1 FROM nodes)").first { $0.int(0) != 0 } ?? true
    }

    /// After a crash or a lost release: an interrupted write's data is the
    /// truth, its size and its mtime both. While an asset is marked, every
    /// change of its mtime reaches its content file (writes stamp it; a
    /// create, the mark, setattr and a truncate set it: see
    /// `ContentStore.setModificationTime`), so the data's mtime is the one
    /// `stat` last showed. The ctime never goes back.
    func adoptInterruptedWrite(_ id: NodeID, size: Int64, modified: Nanoseconds) throws {
        try statement("""
            UPDATE nodes SET size = ?2, mtime = ?3, ctime = max(ctime, ?3) WHERE id = ?1
            """).bind(.int(id), .int(size), .int(modified)).run()
    }

    /// fsck: a row whose size is not its data's, with no write marked (a
    /// store older than the mark, or damaged). The size comes from the data;
    /// the mtime too if the data changed after the row's last change (its
    /// ctime): otherwise a later setattr set it, and it stays.
    func adoptDataSize(_ id: NodeID, size: Int64, modified: Nanoseconds) throws {
        try statement("""
            UPDATE nodes SET size = ?2,
                mtime = CASE WHEN ?3 > ctime THEN ?3 ELSE mtime END, ctime = max(ctime, ?3)
            WHERE id = ?1
            """).bind(.int(id), .int(size), .int(modified)).run()
    }

    /// `name` if `directory` has no such entry (or it is `owner`'s), else the
    /// first free `(n)` form.
    func freeName(in directory: NodeID, for name: Name, owner: NodeID? = nil) throws -> Name {
        var candidate = name
        var n = 2
        while let holder = try child(of: directory, named: candidate), holder != owner {
            candidate = Names.numbered(name, n)
            n += 1
        }
        return candidate
    }

    func assetCount() throws -> Int64 {
        try scalarInt("SELECT count(*) FROM nodes WHERE kind = \(NodeKind.asset.rawValue)")
    }

    // MARK: crash recovery

    func schedulePurge(_ id: NodeID) throws {
        try statement("INSERT OR IGNORE INTO pending_purges(id) VALUES (?1)").bind(.int(id)).run()
    }

    /// A purge is done once its data is freed: its facts and its pending row go.
    func purgeDone(_ id: NodeID) throws {
        try statement("DELETE FROM asset_facts WHERE asset = ?1").bind(.int(id)).run()
        try statement("DELETE FROM pending_purges WHERE id = ?1").bind(.int(id)).run()
    }

    func pendingPurges() throws -> [NodeID] {
        try ids("SELECT id FROM pending_purges")
    }

    func beginWrite(_ id: NodeID) throws {
        try statement("INSERT OR IGNORE INTO unfinished_writes(id) VALUES (?1)").bind(.int(id)).run()
    }

    /// The end of a write: the mark goes, and with a remote the asset's data
    /// joins the upload queue, in the same transaction (SEMANTICS.md § Remote storage).
    func endWrite(_ id: NodeID) throws {
        try statement("DELETE FROM unfinished_writes WHERE id = ?1").bind(.int(id)).run()
        try queueUpload(id)
    }

    /// Whether `id` is marked as being written (its data may be ahead of its row).
    func isBeingWritten(_ id: NodeID) throws -> Bool {
        try statement("SELECT 1 FROM unfinished_writes WHERE id = ?1").bind(.int(id)).first { _ in true } ?? false
    }

    func unfinishedWrites() throws -> [NodeID] {
        try ids("SELECT id FROM unfinished_writes")
    }

    /// The highest node id ever committed.
    func lastAllocatedID() throws -> NodeID {
        NodeID(try scalarInt("SELECT seq FROM sqlite_sequence WHERE name = 'nodes'"))
    }

    private func ids(_ sql: String) throws -> [NodeID] {
        let statement = try self.statement(sql)
        var result: [NodeID] = []
        while try statement.step() { result.append(NodeID(bitPattern: statement.int64(0))) }
        return result
    }

    // MARK: extended attributes

    func xattr(_ node: NodeID, _ name: Name) throws -> [UInt8]? {
        let statement = try self.statement("SELECT value FROM xattrs WHERE node = ?1 AND name = ?2")
        return try statement.bind(.int(node), .blob(name)).first { $0.blob(0) }
    }

    func xattrNames(_ node: NodeID) throws -> [Name] {
        let statement = try self.statement("SELECT name FROM xattrs WHERE node = ?1 ORDER BY name")
        try statement.bind(.int(node))
        var names: [Name] = []
        while try statement.step() { names.append(statement.blob(0)) }
        return names
    }

    func setXattr(_ node: NodeID, _ name: Name, _ value: [UInt8]) throws {
        try statement("INSERT OR REPLACE INTO xattrs(node, name, value) VALUES (?1, ?2, ?3)")
            .bind(.int(node), .blob(name), .blob(value)).run()
    }

    func removeXattr(_ node: NodeID, _ name: Name) throws {
        try statement("DELETE FROM xattrs WHERE node = ?1 AND name = ?2").bind(.int(node), .blob(name)).run()
    }
}

// MARK: statistics

extension Database {
    /// Counts and sizes for `albumfs stats`: one pass over the nodes, one over
    /// Recently Deleted's rows (a store not yet migrated has none).
    func storeStatistics() throws -> StoreStatistics {
        var result = StoreStatistics()
        result.schemaVersion = try Migrator.version(of: self)
        try statement("""
            SELECT coalesce(sum(kind = 5), 0), coalesce(sum(CASE WHEN kind = 5 THEN size END), 0),
                   coalesce(sum(kind = 4), 0), coalesce(sum(kind = 10), 0)
            FROM nodes
            """).first { row in
            result.assets = row.int64(0)
            result.bytes = row.int64(1)
            result.albums = row.int64(2)
            result.sideFiles = row.int64(3)
        }
        if result.schemaVersion >= 3 {
            // The trashes' .trashinfo files are side files too, but not the user's.
            result.sideFiles -= try scalarInt("""
                SELECT count(*) FROM entries e JOIN trashes t ON e.parent = t.info
                """)
            try statement("""
                SELECT count(*), coalesce(sum(n.size), 0) FROM deleted_assets d JOIN nodes n ON n.id = d.asset
                """).first { row in
                result.deletedAssets = row.int64(0)
                result.deletedBytes = row.int64(1)
            }
            result.assets -= result.deletedAssets
            result.bytes -= result.deletedBytes
        }
        if result.schemaVersion >= 4 {
            // (Facts of a purge not yet done have no node.)
            let live = """
                EXISTS (SELECT 1 FROM nodes n WHERE n.id = f.asset)
                AND NOT EXISTS (SELECT 1 FROM deleted_assets d WHERE d.asset = f.asset)
                """
            for (kind, count) in try statement("SELECT f.kind, count(*) FROM asset_facts f WHERE \(live) GROUP BY f.kind")
                .all({ ($0.text(0), $0.int64(1)) }) {
                result.kinds[kind] = count
            }
            result.unread = result.assets - result.kinds.values.reduce(0, +)
            result.favorites = try scalarInt("SELECT count(*) FROM favorites f WHERE \(live)")
        }
        if result.schemaVersion >= 7, let remote = try remoteConfiguration() {
            result.remote = remote.url + " at " + remote.endpoint
            try statement("""
                SELECT count(*), coalesce(sum(n.size), 0) FROM upload_queue q JOIN nodes n ON n.id = q.asset
                """).first { row in
                result.uploadsPending = row.int64(0)
                result.uploadBytesPending = row.int64(1)
            }
            result.objects = try scalarInt("SELECT count(DISTINCT sha256) FROM remote_objects")
        }
        if result.schemaVersion >= 8 {
            try statement("""
                SELECT count(*), coalesce(sum(n.size), 0) FROM evicted e JOIN nodes n ON n.id = e.asset
                """).first { row in
                result.remoteOnlyAssets = row.int64(0)
                result.remoteOnlyBytes = row.int64(1)
            }
        }
        result.localBytes = result.bytes + result.deletedBytes - result.remoteOnlyBytes
        if result.schemaVersion >= 10, result.remote != nil {
            result.oldestUploadQueued = try statement("SELECT min(queued_at) FROM upload_queue").first { $0.optionalInt64(0) } ?? nil
            try statement("SELECT last_error, error_at FROM remote_status WHERE id = 1").first { row in
                result.lastRemoteError = row.optionalText(0)
                result.lastRemoteErrorTime = row.optionalInt64(1)
            }
        }
        return result
    }
}
