import SQLiteKit

/// The SQL of the store's remote (SEMANTICS.md § Remote storage): its
/// configuration, the upload queue, what the bucket holds, the deletes owed.
/// Callers hold the library's database lock.
extension Database {
    // MARK: the remote

    func remoteConfiguration() throws -> RemoteConfiguration? {
        try statement("SELECT url, endpoint, region, profile FROM remote WHERE id = 1")
            .first { RemoteConfiguration(url: $0.text(0), endpoint: $0.text(1), region: $0.text(2), profile: $0.optionalText(3)) }
    }

    func setRemoteConfiguration(_ remote: RemoteConfiguration) throws {
        try statement("INSERT OR REPLACE INTO remote(id, url, endpoint, region, profile) VALUES (1, ?1, ?2, ?3, ?4)")
            .bind(.text(remote.url), .text(remote.endpoint), .text(remote.region), remote.profile.map { .text($0) } ?? .null).run()
    }

    // MARK: the upload queue

    /// Queues an asset's data for upload (again: at the end of the queue),
    /// when the store has a remote and `id` is an asset.
    func queueUpload(_ id: NodeID) throws {
        try statement("""
            INSERT OR REPLACE INTO upload_queue(asset, queued_at) SELECT ?1, ?2 WHERE EXISTS (SELECT 1 FROM remote)
            AND EXISTS (SELECT 1 FROM nodes WHERE id = ?1 AND kind = \(NodeKind.asset.rawValue))
            """).bind(.int(id), .int(currentTime())).run()
    }

    /// Every asset, queued (`albumfs remote attach`, an existing library).
    func queueEveryAsset() throws {
        try statement("""
            INSERT OR IGNORE INTO upload_queue(asset, queued_at) SELECT id, ?1 FROM nodes WHERE kind = \(NodeKind.asset.rawValue) ORDER BY id
            """).bind(.int(currentTime())).run()
    }

    // MARK: the uploader's state

    /// Records the uploader's failure (nil: its last step worked).
    func setRemoteError(_ why: String?) throws {
        if let why {
            try statement("INSERT OR REPLACE INTO remote_status(id, last_error, error_at) VALUES (1, ?1, ?2)")
                .bind(.text(why), .int(currentTime())).run()
        } else {
            try execute("DELETE FROM remote_status")
        }
    }

    /// The queued asset to upload next and its place in the queue: the first
    /// that nothing is writing.
    func nextUpload() throws -> (asset: NodeID, ticket: Int64)? {
        try statement("""
            SELECT asset, rowid FROM upload_queue WHERE asset NOT IN (SELECT id FROM unfinished_writes) ORDER BY rowid LIMIT 1
            """).first { (NodeID(bitPattern: $0.int64(0)), $0.int64(1)) }
    }

    /// The first `limit` queued assets not being written, with their tickets
    /// and sizes, in queue order.
    func nextUploads(limit: Int) throws -> [(asset: NodeID, ticket: Int64, size: Int64)] {
        let statement = try self.statement("""
            SELECT q.asset, q.rowid, coalesce(n.size, 0) FROM upload_queue q LEFT JOIN nodes n ON n.id = q.asset
            WHERE q.asset NOT IN (SELECT id FROM unfinished_writes) ORDER BY q.rowid LIMIT ?1
            """)
        try statement.bind(.int(limit))
        var rows: [(NodeID, Int64, Int64)] = []
        while try statement.step() {
            rows.append((NodeID(bitPattern: statement.int64(0)), statement.int64(1), statement.int64(2)))
        }
        return rows
    }

    /// Takes the asset off the queue if it was not queued again since `ticket`.
    func uploadDone(_ asset: NodeID, ticket: Int64) throws {
        try statement("DELETE FROM upload_queue WHERE asset = ?1 AND rowid = ?2").bind(.int(asset), .int(ticket)).run()
    }

    func isQueuedForUpload(_ asset: NodeID) throws -> Bool {
        try statement("SELECT 1 FROM upload_queue WHERE asset = ?1").bind(.int(asset)).first { _ in true } ?? false
    }

    func uploadsQueued() throws -> Int64 {
        try scalarInt("SELECT count(*) FROM upload_queue")
    }

    // MARK: objects

    /// What the bucket holds of `asset`: its object's digests, and the mtime
    /// of the data read for it.
    func remoteObject(of asset: NodeID) throws -> (digest: ObjectDigest, modified: Nanoseconds)? {
        try statement("SELECT sha256, size, data_mtime, chunk_sha256 FROM remote_objects WHERE asset = ?1")
            .bind(.int(asset)).first { (ObjectDigest(sha256: $0.text(0), size: $0.int64(1), chunks: $0.optionalBlob(3)), $0.int64(2)) }
    }

    /// Records that the bucket holds `asset`'s data as the object `digest`
    /// names; the object it had before goes to the deletes if nothing else
    /// needs it, and this one leaves them (it is needed again). `etag` nil:
    /// not known (`fsck --remote` then checks the size alone).
    func setRemoteObject(_ asset: NodeID, _ digest: ObjectDigest, etag: String?, modified: Nanoseconds) throws {
        let previous = try remoteObject(of: asset)?.digest.sha256
        // (The thumbnail stored beside the same object stays recorded.)
        try statement("""
            INSERT OR REPLACE INTO remote_objects(asset, sha256, size, data_mtime, chunk_sha256, etag, thumbnail_sha256)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, (SELECT thumbnail_sha256 FROM remote_objects WHERE asset = ?1 AND sha256 = ?2))
            """).bind(.int(asset), .text(digest.sha256), .int(digest.size), .int(modified), digest.chunks.map { .blob($0) } ?? .null,
                      etag.map { .text($0) } ?? .null).run()
        try statement("DELETE FROM remote_deletes WHERE sha256 = ?1").bind(.text(digest.sha256)).run()
        if let previous, previous != digest.sha256 { try deleteObjectIfUnneeded(previous) }
    }

    // MARK: uploads under way

    /// An upload of `asset` as object `sha256` may store it from now on.
    func beginUpload(_ asset: NodeID, sha256: String) throws {
        try statement("INSERT OR IGNORE INTO uploads_under_way(asset, sha256) VALUES (?1, ?2)").bind(.int(asset), .text(sha256)).run()
    }

    /// The uploads of `asset` are over (recorded, or given up): the objects
    /// they may have stored that no asset needs are owed a delete.
    func endUploads(of asset: NodeID) throws {
        for sha256 in try statement("SELECT sha256 FROM uploads_under_way WHERE asset = ?1").bind(.int(asset)).all({ $0.text(0) }) {
            try deleteObjectIfUnneeded(sha256)
        }
        try statement("DELETE FROM uploads_under_way WHERE asset = ?1").bind(.int(asset)).run()
    }

    /// A purged asset: off the queue, and its object (and what its uploads
    /// under way may have stored) to the deletes unless another asset has
    /// the same content.
    func forgetRemote(of asset: NodeID) throws {
        try statement("DELETE FROM upload_queue WHERE asset = ?1").bind(.int(asset)).run()
        try queueCompanionDelete(asset)
        try unmarkEvicted(asset)
        try setKeptLocal(asset, false)
        if let sha256 = try remoteObject(of: asset)?.digest.sha256 {
            try statement("DELETE FROM remote_objects WHERE asset = ?1").bind(.int(asset)).run()
            try deleteObjectIfUnneeded(sha256)
        }
        try endUploads(of: asset)
    }

    private func deleteObjectIfUnneeded(_ sha256: String) throws {
        try statement("""
            INSERT OR IGNORE INTO remote_deletes(sha256) SELECT ?1
            WHERE NOT EXISTS (SELECT 1 FROM remote_objects WHERE sha256 = ?1)
            """).bind(.text(sha256)).run()
    }

    /// An object owed a delete, if any (the oldest).
    func nextRemoteDelete() throws -> String? {
        try statement("SELECT sha256 FROM remote_deletes ORDER BY rowid LIMIT 1").first { $0.text(0) }
    }

    /// Whether an asset still needs object `sha256` (then its delete is dropped).
    func isObjectNeeded(_ sha256: String) throws -> Bool {
        try statement("SELECT 1 FROM remote_objects WHERE sha256 = ?1").bind(.text(sha256)).first { _ in true } ?? false
    }

    func remoteDeleteDone(_ sha256: String) throws {
        try statement("DELETE FROM remote_deletes WHERE sha256 = ?1").bind(.text(sha256)).run()
    }

    // MARK: eviction (-o cache_size)

    func isEvicted(_ asset: NodeID) throws -> Bool {
        try statement("SELECT 1 FROM evicted WHERE asset = ?1").bind(.int(asset)).first { _ in true } ?? false
    }

    func markEvicted(_ asset: NodeID) throws {
        try statement("INSERT OR IGNORE INTO evicted(asset) VALUES (?1)").bind(.int(asset)).run()
    }

    func unmarkEvicted(_ asset: NodeID) throws {
        try statement("DELETE FROM evicted WHERE asset = ?1").bind(.int(asset)).run()
    }

    func evictedAssets() throws -> [NodeID] {
        try statement("SELECT asset FROM evicted").all { NodeID(bitPattern: $0.int64(0)) }
    }

    /// Bytes of asset data on the local disk (the assets not evicted).
    func localAssetBytes() throws -> Int64 {
        try scalarInt("""
            SELECT coalesce(sum(n.size), 0) FROM nodes n
            WHERE n.kind = \(NodeKind.asset.rawValue) AND NOT EXISTS (SELECT 1 FROM evicted v WHERE v.asset = n.id)
            """)
    }

    /// Assets that may be evicted, oldest import first: the bucket holds
    /// exactly their data (its size and mtime as recorded), they are not
    /// queued, not being written, not pinned and not favorites (Favorites
    /// stay local, as Photos keeps what you look at most). `afterFacts`: only
    /// those whose facts are read, so that the thumbnail made with them never
    /// costs a download (SEMANTICS.md § Thumbnails).
    func evictionCandidates(limit: Int, afterFacts: Bool) throws -> [(asset: NodeID, size: Int64)] {
        try statement("""
            SELECT n.id, n.size FROM nodes n JOIN remote_objects o ON o.asset = n.id
            WHERE n.kind = \(NodeKind.asset.rawValue) AND n.size > 0 AND o.size = n.size AND o.data_mtime = n.mtime
            AND NOT EXISTS (SELECT 1 FROM evicted v WHERE v.asset = n.id)
            AND NOT EXISTS (SELECT 1 FROM upload_queue q WHERE q.asset = n.id)
            AND NOT EXISTS (SELECT 1 FROM unfinished_writes u WHERE u.id = n.id)
            AND NOT EXISTS (SELECT 1 FROM kept_local k WHERE k.asset = n.id)
            AND NOT EXISTS (SELECT 1 FROM favorites f WHERE f.asset = n.id)
            AND (?2 = 0 OR EXISTS (SELECT 1 FROM asset_facts a WHERE a.asset = n.id))
            ORDER BY n.imported, n.id LIMIT ?1
            """).bind(.int(Int64(limit)), .int(afterFacts ? 1 : 0)).all { (NodeID(bitPattern: $0.int64(0)), $0.int64(1)) }
    }

    func isKeptLocal(_ asset: NodeID) throws -> Bool {
        try statement("SELECT 1 FROM kept_local WHERE asset = ?1").bind(.int(asset)).first { _ in true } ?? false
    }

    func setKeptLocal(_ asset: NodeID, _ kept: Bool) throws {
        try statement(kept ? "INSERT OR IGNORE INTO kept_local(asset) VALUES (?1)" : "DELETE FROM kept_local WHERE asset = ?1")
            .bind(.int(asset)).run()
    }
}

// MARK: fsck --remote

extension Database {
    /// Every object the library records, with the assets that need it: (SHA-256, size, ETag if recorded, assets).
    func recordedObjects() throws -> [(sha256: String, size: Int64, etag: String?, assets: [NodeID])] {
        var found: [String: (size: Int64, etag: String?, assets: [NodeID])] = [:]
        for (asset, sha256, size, etag) in try statement("SELECT asset, sha256, size, etag FROM remote_objects ORDER BY sha256, asset")
            .all({ (NodeID(bitPattern: $0.int64(0)), $0.text(1), $0.int64(2), $0.optionalText(3)) }) {
            found[sha256, default: (size, etag, [])].assets.append(asset)
            if etag != nil { found[sha256]!.etag = etag }
        }
        return found.map { ($0.key, $0.value.size, $0.value.etag, $0.value.assets) }.sorted { $0.sha256 < $1.sha256 }
    }

    /// The objects owed a delete (done by the next mount).
    func pendingRemoteDeletes() throws -> Set<String> {
        Set(try statement("SELECT sha256 FROM remote_deletes").all { $0.text(0) })
    }

    /// Objects an upload under way may have stored and not recorded yet (a
    /// crash between its PUT and its record): the next mount records them.
    func objectsUnderWay() throws -> Set<String> {
        Set(try statement("SELECT sha256 FROM uploads_under_way").all { $0.text(0) })
    }

    /// The object of content `sha256` was stored again: its new ETag.
    func setRemoteETag(_ sha256: String, _ etag: String) throws {
        try statement("UPDATE remote_objects SET etag = ?2 WHERE sha256 = ?1").bind(.text(sha256), .text(etag)).run()
    }
}
