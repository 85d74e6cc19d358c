import SQLiteKit

/// The SQL of Recently Deleted and the trashes (see Library+Delete.swift).
extension Database {
    struct DeletedAsset {
        let deletedAt: Nanoseconds
        /// The trash files/ entry that shows it, if any.
        let trash: (directory: NodeID, name: Name)?
    }

    func deletedAsset(_ id: NodeID) throws -> DeletedAsset? {
        let statement = try self.statement("SELECT deleted_at, trash, trash_name FROM deleted_assets WHERE asset = ?1")
        return try statement.bind(.int(id)).first { row in
            DeletedAsset(deletedAt: row.int64(0),
                         trash: row.isNull(1) ? nil : (NodeID(bitPattern: row.int64(1)), row.blob(2)))
        }
    }

    func isDeleted(_ id: NodeID) throws -> Bool {
        try statement("SELECT 1 FROM deleted_assets WHERE asset = ?1").bind(.int(id)).first { _ in true } ?? false
    }

    /// `unwrittenInfoPath`: the original path its trash's `.trashinfo` is to
    /// show once written (an rm: albumfs writes it when first needed).
    func insertDeletedAsset(_ id: NodeID, at time: Nanoseconds, trash: (directory: NodeID, name: Name)?,
                            unwrittenInfoPath: Name? = nil) throws {
        try statement("""
            INSERT INTO deleted_assets(asset, deleted_at, trash, trash_name, unwritten_info_path) VALUES (?1, ?2, ?3, ?4, ?5)
            """).bind(.int(id), .int(time), trash.map { .int($0.directory) } ?? .null, trash.map { .blob($0.name) } ?? .null,
                      unwrittenInfoPath.map { .blob($0) } ?? .null)
            .run()
    }

    func removeDeletedAsset(_ id: NodeID) throws {
        try statement("DELETE FROM deleted_assets WHERE asset = ?1").bind(.int(id)).run()
    }

    /// Deleted assets whose time is up: deleted at or before `cutoff`.
    func assetsDeleted(atOrBefore cutoff: Nanoseconds, limit: Int) throws -> [NodeID] {
        let statement = try self.statement("""
            SELECT asset FROM deleted_assets WHERE deleted_at <= ?1 ORDER BY deleted_at LIMIT ?2
            """)
        try statement.bind(.int(cutoff), .int(limit))
        var ids: [NodeID] = []
        while try statement.step() { ids.append(NodeID(bitPattern: statement.int64(0))) }
        return ids
    }

    // MARK: remembered album entries

    func remember(_ asset: NodeID, album: NodeID, name: Name) throws {
        try statement("INSERT OR REPLACE INTO remembered_entries(asset, album, name) VALUES (?1, ?2, ?3)")
            .bind(.int(asset), .int(album), .blob(name)).run()
    }

    func rememberedEntries(of asset: NodeID) throws -> [(album: NodeID, name: Name)] {
        let statement = try self.statement("SELECT album, name FROM remembered_entries WHERE asset = ?1")
        try statement.bind(.int(asset))
        var result: [(NodeID, Name)] = []
        while try statement.step() { result.append((NodeID(bitPattern: statement.int64(0)), statement.blob(1))) }
        return result
    }

    func forgetRememberedEntries(of asset: NodeID) throws {
        try statement("DELETE FROM remembered_entries WHERE asset = ?1").bind(.int(asset)).run()
    }

    // MARK: trashed albums

    /// The albums of the subtree rooted at `album`, itself first.
    func albumSubtree(_ album: NodeID) throws -> [NodeID] {
        let statement = try self.statement("""
            WITH RECURSIVE tree(id) AS (SELECT ?1 UNION ALL SELECT n.id FROM nodes n JOIN tree t ON n.parent = t.id)
            SELECT id FROM tree
            """)
        try statement.bind(.int(album))
        var ids: [NodeID] = []
        while try statement.step() { ids.append(NodeID(bitPattern: statement.int64(0))) }
        return ids
    }

    /// Puts every entry of `directories` aside under the trashed album `album`.
    func putEntriesAside(of directories: [NodeID], under album: NodeID) throws {
        let copy = try statement("""
            INSERT INTO trashed_entries(album, parent, name, child) SELECT ?1, parent, name, child FROM entries WHERE parent = ?2
            """)
        let remove = try statement("DELETE FROM entries WHERE parent = ?1")
        for directory in directories {
            try copy.bind(.int(album), .int(directory)).run()
            try remove.bind(.int(directory)).run()
        }
    }

    /// The entries put aside under a trashed album, and then forgets them.
    func takeEntriesPutAside(under album: NodeID) throws -> [(parent: NodeID, name: Name, child: NodeID)] {
        let statement = try self.statement("SELECT parent, name, child FROM trashed_entries WHERE album = ?1")
        try statement.bind(.int(album))
        var result: [(NodeID, Name, NodeID)] = []
        while try statement.step() {
            result.append((NodeID(bitPattern: statement.int64(0)), statement.blob(1), NodeID(bitPattern: statement.int64(2))))
        }
        try self.statement("DELETE FROM trashed_entries WHERE album = ?1").bind(.int(album)).run()
        return result
    }

    /// Drops every trace of `child` in what trashed albums put aside (it is purged).
    func forgetPutAsideEntries(of child: NodeID) throws {
        try statement("DELETE FROM trashed_entries WHERE child = ?1").bind(.int(child)).run()
    }

    func setKind(_ id: NodeID, _ kind: NodeKind) throws {
        try statement("UPDATE nodes SET kind = ?2 WHERE id = ?1").bind(.int(id), .int(kind.rawValue)).run()
    }

    func setParent(_ id: NodeID, _ parent: NodeID?) throws {
        try statement("UPDATE nodes SET parent = ?2 WHERE id = ?1").bind(.int(id), parent.map { .int($0) } ?? .null).run()
    }

    // MARK: trashes

    func trash(of uid: UInt32) throws -> TrashDirectories? {
        try statement("SELECT directory, files, info, expunged FROM trashes WHERE uid = ?1").bind(.int(uid))
            .first(Self.decodeTrash)
    }

    /// The trash whose files/ is `directory`, if it is one.
    func trash(ofFiles directory: NodeID) throws -> TrashDirectories? {
        try statement("SELECT directory, files, info, expunged FROM trashes WHERE files = ?1").bind(.int(directory))
            .first(Self.decodeTrash)
    }

    /// The trash whose info/ is `directory`, if it is one with `.trashinfo`
    /// files still to write.
    func trash(withUnwrittenInfosIn directory: NodeID) throws -> TrashDirectories? {
        try statement("""
            SELECT t.directory, t.files, t.info, t.expunged FROM trashes t WHERE t.info = ?1
            AND EXISTS (SELECT 1 FROM deleted_assets d WHERE d.trash = t.files AND d.unwritten_info_path IS NOT NULL)
            """).bind(.int(directory)).first(Self.decodeTrash)
    }

    /// A `.trashinfo` albumfs is still to write: for the files/ entry `name`
    /// of deleted asset `asset`, once at `originalPath`.
    struct UnwrittenTrashInfo {
        let asset: NodeID
        let name: Name
        let originalPath: Name
        let deletedAt: Nanoseconds
    }

    func unwrittenTrashInfos(of files: NodeID) throws -> [UnwrittenTrashInfo] {
        try statement("""
            SELECT asset, trash_name, unwritten_info_path, deleted_at FROM deleted_assets
            WHERE trash = ?1 AND unwritten_info_path IS NOT NULL ORDER BY asset
            """).bind(.int(files)).all { row in
            UnwrittenTrashInfo(asset: NodeID(bitPattern: row.int64(0)), name: row.blob(1), originalPath: row.blob(2),
                               deletedAt: row.int64(3))
        }
    }

    func trashInfoWritten(_ asset: NodeID) throws {
        try statement("UPDATE deleted_assets SET unwritten_info_path = NULL WHERE asset = ?1").bind(.int(asset)).run()
    }

    private static func decodeTrash(_ row: Statement) -> TrashDirectories {
        TrashDirectories(top: NodeID(bitPattern: row.int64(0)), files: NodeID(bitPattern: row.int64(1)),
                         info: NodeID(bitPattern: row.int64(2)), expunged: NodeID(bitPattern: row.int64(3)))
    }

    func insertTrash(uid: UInt32, _ trash: TrashDirectories) throws {
        try statement("INSERT INTO trashes(uid, directory, files, info, expunged) VALUES (?1, ?2, ?3, ?4, ?5)")
            .bind(.int(uid), .int(trash.top), .int(trash.files), .int(trash.info), .int(trash.expunged)).run()
    }

    /// Every entry in directory `parent` whose child is `child`.
    func names(of child: NodeID, in parent: NodeID) throws -> [Name] {
        let statement = try self.statement("SELECT name FROM entries WHERE child = ?1 AND parent = ?2")
        try statement.bind(.int(child), .int(parent))
        var names: [Name] = []
        while try statement.step() { names.append(statement.blob(0)) }
        return names
    }
}

extension Database {
    /// Every entry of `directory`: its name and child.
    func listingNames(_ directory: NodeID) throws -> [(name: Name, child: NodeID)] {
        let statement = try self.statement("SELECT name, child FROM entries WHERE parent = ?1")
        try statement.bind(.int(directory))
        var result: [(Name, NodeID)] = []
        while try statement.step() { result.append((statement.blob(0), NodeID(bitPattern: statement.int64(1)))) }
        return result
    }
}

extension Database {
    // MARK: data kept in the database until first opened

    func setSideFileData(_ id: NodeID, _ data: [UInt8]) throws {
        try statement("INSERT OR REPLACE INTO side_file_data(node, data) VALUES (?1, ?2)").bind(.int(id), .blob(data)).run()
    }

    func sideFileData(_ id: NodeID) throws -> [UInt8]? {
        try statement("SELECT data FROM side_file_data WHERE node = ?1").bind(.int(id)).first { $0.blob(0) }
    }

    func removeSideFileData(_ id: NodeID) throws {
        try statement("DELETE FROM side_file_data WHERE node = ?1").bind(.int(id)).run()
    }

    func nodesWithDataInDatabase() throws -> [NodeID] {
        try statement("SELECT node FROM side_file_data").all { NodeID(bitPattern: $0.int64(0)) }
    }
}
