import SQLiteKit

/// The SQL of one asset's resources: its original, kept through edits, and
/// its identifier. SEMANTICS.md § One asset.
extension Database {
    // MARK: originals

    /// The original kept for edited asset `asset`, if it has one.
    func original(of asset: NodeID) throws -> NodeID? {
        try statement("SELECT original FROM originals WHERE asset = ?1").bind(.int(asset))
            .first { NodeID(bitPattern: $0.int64(0)) }
    }

    /// The edited asset whose original `node` is, if it is one.
    func editedAsset(withOriginal node: NodeID) throws -> NodeID? {
        try statement("SELECT asset FROM originals WHERE original = ?1").bind(.int(node))
            .first { NodeID(bitPattern: $0.int64(0)) }
    }

    func setOriginal(of asset: NodeID, to original: NodeID) throws {
        try statement("INSERT OR REPLACE INTO originals(asset, original) VALUES (?1, ?2)")
            .bind(.int(asset), .int(original)).run()
    }

    func forgetOriginal(of asset: NodeID) throws {
        try statement("DELETE FROM originals WHERE asset = ?1").bind(.int(asset)).run()
    }

    /// Every original kept (fsck: nodes that are rightly in no directory).
    func originalIDs() throws -> [NodeID] {
        let statement = try self.statement("SELECT original FROM originals")
        var ids: [NodeID] = []
        while try statement.step() { ids.append(NodeID(bitPattern: statement.int64(0))) }
        return ids
    }

    /// The original shown as `name` in `Smart Albums/Originals/`: the
    /// original of the live asset whose roll name `name` is.
    func originalLookup(name: Name) throws -> Attributes? {
        try statement("""
            SELECT \(Self.attributeColumns) FROM entries e
            JOIN originals o ON o.asset = e.child
            JOIN nodes n ON n.id = o.original
            WHERE e.parent = \(FixedNode.cameraRoll) AND e.name = ?1
            """).bind(.blob(name)).first { Self.decodeAttributes($0, from: 0) }
    }

    /// `Smart Albums/Originals/` after edited asset `after`, in asset order:
    /// each original under its asset's roll name.
    func originalsListing(after: Int64, limit: Int) throws -> [(cookie: Int64, name: Name, attributes: Attributes)] {
        let statement = try self.statement("""
            SELECT o.asset, e.name, \(Self.attributeColumns) FROM originals o
            JOIN entries e ON e.child = o.asset AND e.parent = \(FixedNode.cameraRoll)
            JOIN nodes n ON n.id = o.original
            WHERE o.asset > ?1 ORDER BY o.asset LIMIT ?2
            """)
        try statement.bind(.int(after), .int(limit))
        var rows: [(Int64, Name, Attributes)] = []
        while try statement.step() {
            rows.append((statement.int64(0), statement.blob(1), Self.decodeAttributes(statement, from: 2)))
        }
        return rows
    }

    /// Whether the data and attributes of `id` may not change: a deleted
    /// asset, or an original (SEMANTICS.md § Edits keep the original).
    func isUnchangeable(_ id: NodeID) throws -> Bool {
        try statement("""
            SELECT 1 WHERE EXISTS (SELECT 1 FROM deleted_assets WHERE asset = ?1)
            OR EXISTS (SELECT 1 FROM originals WHERE original = ?1)
            """).bind(.int(id)).first { _ in true } ?? false
    }

    /// Entry `name` of `parent` shows `child` from now on.
    func repointEntry(_ parent: NodeID, _ name: Name, to child: NodeID) throws {
        try statement("UPDATE entries SET child = ?3 WHERE parent = ?1 AND name = ?2")
            .bind(.int(parent), .blob(name), .int(child)).run()
    }

    // MARK: identifiers

    /// The asset identifier of node `id`: its own id unless an edit handed it another.
    func assetIdentifier(of id: NodeID) throws -> NodeID {
        try statement("SELECT asset FROM asset_identifiers WHERE node = ?1").bind(.int(id))
            .first { NodeID(bitPattern: $0.int64(0)) } ?? id
    }

    /// Gives node `id` the identifier `asset` (its own id: the row goes).
    func setAssetIdentifier(of id: NodeID, to asset: NodeID) throws {
        if asset == id {
            try statement("DELETE FROM asset_identifiers WHERE node = ?1").bind(.int(id)).run()
        } else {
            try statement("INSERT OR REPLACE INTO asset_identifiers(node, asset) VALUES (?1, ?2)")
                .bind(.int(id), .int(asset)).run()
        }
    }

    // MARK: hidden assets and remembered memberships

    /// Hands the remembered album entries of `from` to `to` (an update of a
    /// hidden asset); where both remember an album, `to` keeps its own.
    func handOverRememberedEntries(from: NodeID, to: NodeID) throws {
        try statement("""
            INSERT OR IGNORE INTO remembered_entries(asset, album, name)
            SELECT ?2, album, name FROM remembered_entries WHERE asset = ?1
            """).bind(.int(from), .int(to)).run()
        try forgetRememberedEntries(of: from)
    }
}
