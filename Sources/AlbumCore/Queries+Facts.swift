import SQLiteKit
import Digests

/// The SQL of what albumfs knows of each asset, and of the computed views.
/// Callers hold the library's database lock.
extension Database {
    // MARK: facts

    func facts(of asset: NodeID) throws -> AssetFacts? {
        try statement("""
            SELECT sha256, type, kind, captured, width, height, duration, location, content_id, screenshot, raw
            FROM asset_facts WHERE asset = ?1
            """).bind(.int(asset)).first { row in
            AssetFacts(sha256: row.text(0), type: row.optionalText(1), kind: AssetFacts.Kind(rawValue: row.text(2)) ?? .other,
                       captured: row.optionalText(3), width: row.optionalInt(4), height: row.optionalInt(5),
                       duration: row.optionalDouble(6), location: row.optionalText(7), contentIdentifier: row.optionalText(8),
                       isScreenshot: row.int(9) != 0, isRaw: row.int(10) != 0)
        }
    }

    func setFacts(_ asset: NodeID, _ f: AssetFacts, month: String, screenshot: Bool, stamp: (size: Int64, modified: Nanoseconds)) throws {
        try statement("""
            INSERT OR REPLACE INTO asset_facts(asset, sha256, type, kind, captured, month, width, height, duration,
                location, content_id, screenshot, raw, data_size, data_mtime)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
            """).bind(.int(asset), .text(f.sha256), f.type.map { .text($0) } ?? .null, .text(f.kind.rawValue),
                      f.captured.map { .text($0) } ?? .null, .text(month),
                      f.width.map { .int($0) } ?? .null, f.height.map { .int($0) } ?? .null,
                      f.duration.map { .double($0) } ?? .null, f.location.map { .text($0) } ?? .null,
                      f.contentIdentifier.map { .text($0) } ?? .null, .int(screenshot ? 1 : 0), .int(f.isRaw ? 1 : 0),
                      .int(stamp.size), .int(stamp.modified)).run()
    }

    /// The thumbnail made with the facts just set, or none (SEMANTICS.md § Thumbnails).
    func setThumbnail(_ asset: NodeID, _ png: [UInt8]?) throws {
        if let png {
            try statement("INSERT OR REPLACE INTO thumbnails(asset, png) VALUES (?1, ?2)").bind(.int(asset), .blob(png)).run()
        } else {
            try statement("DELETE FROM thumbnails WHERE asset = ?1").bind(.int(asset)).run()
        }
        // Another picture than the bucket's (or none): stored anew beside the object.
        try statement("UPDATE remote_objects SET thumbnail_sha256 = NULL WHERE asset = ?1 AND thumbnail_sha256 IS NOT ?2")
            .bind(.int(asset), png.map { .text(SHA256.hex(SHA256.digest($0))) } ?? .null).run()
    }

    /// Those of `assets` that have a thumbnail here, and of the others the
    /// thumbnail the bucket holds beside the object (a store recovered from
    /// it: the object and the thumbnail's SHA-256; only with facts, which
    /// keep it): one query for all (a listing's page), the ids as a JSON array.
    func thumbnailPlaces(of assets: [NodeID]) throws -> (here: Set<NodeID>, inBucket: [(asset: NodeID, object: String, sha256: String)]) {
        let rows = try statement("""
            SELECT q.value, EXISTS (SELECT 1 FROM thumbnails t WHERE t.asset = q.value), r.sha256, r.thumbnail_sha256
            FROM json_each(?1) q
            LEFT JOIN remote_objects r ON r.asset = q.value AND r.thumbnail_sha256 IS NOT NULL
                AND EXISTS (SELECT 1 FROM asset_facts f WHERE f.asset = q.value)
            """).bind(.text("[" + assets.map { String(Int64(bitPattern: $0)) }.joined(separator: ",") + "]")).all { row in
                (asset: NodeID(bitPattern: row.int64(0)), here: row.int64(1) != 0, object: row.optionalText(2), sha256: row.optionalText(3))
            }
        let inBucket = rows.compactMap { row in
            row.here ? nil : row.object.flatMap { object in row.sha256.map { (row.asset, object, $0) } }
        }
        return (Set(rows.filter(\.here).map(\.asset)), inBucket)
    }

    func thumbnail(of asset: NodeID) throws -> [UInt8]? {
        try statement("SELECT png FROM thumbnails WHERE asset = ?1").bind(.int(asset)).first { $0.blob(0) }
    }

    /// Where the views show an asset, if its facts were read: one row.
    func viewPlacement(of asset: NodeID) throws -> ViewPlacement? {
        try statement("SELECT month, sha256 FROM asset_facts WHERE asset = ?1")
            .bind(.int(asset)).first { ViewPlacement(month: $0.text(0), sha256: $0.text(1)) }
    }

    /// Whether the assets `source` chooses (a view's query) include `asset`.
    func viewShows(_ source: String, _ asset: NodeID) throws -> Bool {
        try statement("SELECT 1 FROM (\(source)) WHERE asset = ?2").bind(.null, .int(asset)).first { _ in true } ?? false
    }

    /// Assets (live or deleted) with no facts yet, in id order, among the ids
    /// in (`after`, `through`]: a scan of a bounded range, however few of
    /// them lack facts.
    func assetsWithoutFacts(after: NodeID, through: NodeID, limit: Int) throws -> [NodeID] {
        try statement("""
            SELECT n.id FROM nodes n WHERE n.kind = \(NodeKind.asset.rawValue) AND n.id > ?1 AND n.id <= ?2
            AND NOT EXISTS (SELECT 1 FROM asset_facts f WHERE f.asset = n.id) ORDER BY n.id LIMIT ?3
            """).bind(.int(after), .int(through), .int(limit)).all { NodeID(bitPattern: $0.int64(0)) }
    }

    /// The highest node id given so far (0: none).
    func highestNodeID() throws -> NodeID {
        try statement("SELECT coalesce(max(id), 0) FROM nodes").first { NodeID(bitPattern: $0.int64(0)) } ?? 0
    }

    /// Live assets whose content has this SHA-256 (oldest import first).
    func assets(withSHA256 sha256: String) throws -> [NodeID] {
        try statement("""
            SELECT f.asset FROM asset_facts f JOIN nodes n ON n.id = f.asset
            WHERE f.sha256 = ?1 AND EXISTS (SELECT 1 FROM entries e WHERE e.child = f.asset AND e.parent = \(FixedNode.cameraRoll))
            ORDER BY n.imported, n.id
            """).bind(.text(sha256)).all { NodeID(bitPattern: $0.int64(0)) }
    }

    /// Every SHA-256 two or more live assets share.
    func duplicatedSHA256s() throws -> [String] {
        try statement("""
            SELECT f.sha256 FROM asset_facts f
            WHERE EXISTS (SELECT 1 FROM entries e WHERE e.child = f.asset AND e.parent = \(FixedNode.cameraRoll))
            GROUP BY f.sha256 HAVING count(*) > 1 ORDER BY f.sha256
            """).all { $0.text(0) }
    }

    /// Every (asset, SHA-256) on record, for `fsck --verify` (not the facts
    /// a purge leaves until it is done: their asset is gone).
    func recordedSHA256s() throws -> [(NodeID, String)] {
        try statement("SELECT f.asset, f.sha256 FROM asset_facts f JOIN nodes n ON n.id = f.asset ORDER BY f.asset")
            .all { (NodeID(bitPattern: $0.int64(0)), $0.text(1)) }
    }

    /// Facts whose asset is gone and whose purge is not pending (fsck).
    func orphanedFacts() throws -> [NodeID] {
        try statement("""
            SELECT f.asset FROM asset_facts f WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = f.asset)
            AND NOT EXISTS (SELECT 1 FROM pending_purges p WHERE p.id = f.asset)
            """).all { NodeID(bitPattern: $0.int64(0)) }
    }

    func deleteFacts(_ asset: NodeID) throws {
        try statement("DELETE FROM asset_facts WHERE asset = ?1").bind(.int(asset)).run()
    }

    // MARK: favorites

    func isFavorite(_ asset: NodeID) throws -> Bool {
        try statement("SELECT 1 FROM favorites WHERE asset = ?1").bind(.int(asset)).first { _ in true } ?? false
    }

    func setFavorite(_ asset: NodeID, _ on: Bool) throws {
        if on {
            try statement("INSERT OR IGNORE INTO favorites(asset) VALUES (?1)").bind(.int(asset)).run()
        } else {
            try statement("DELETE FROM favorites WHERE asset = ?1").bind(.int(asset)).run()
        }
    }

    // MARK: views

    /// Live assets chosen by `source` (SQL giving column `asset`, bound to
    /// ?1 when `key` is given), under their roll names, after asset `after`.
    func viewListing(_ source: String, key: SQLValue?, after: Int64, limit: Int) throws -> [(cookie: Int64, name: Name, attributes: Attributes)] {
        let statement = try self.statement("""
            SELECT v.asset, e.name, \(Self.attributeColumns)
            FROM (\(source)) v
            JOIN entries e ON e.child = v.asset AND e.parent = \(FixedNode.cameraRoll)
            JOIN nodes n ON n.id = v.asset
            WHERE v.asset > ?2 ORDER BY v.asset LIMIT ?3
            """)
        try statement.bind(key ?? .null, .int(after), .int(limit))
        var rows: [(Int64, Name, Attributes)] = []
        while try statement.step() {
            rows.append((statement.int64(0), statement.blob(1), Self.decodeAttributes(statement, from: 2)))
        }
        return rows
    }

    /// The live asset whose roll name is `name`, if `source` chooses it
    /// (correlated: one index seek into the source, not the whole source per lookup).
    func viewLookup(_ source: String, key: SQLValue?, name: Name) throws -> Attributes? {
        try statement("""
            SELECT \(Self.attributeColumns) FROM entries e JOIN nodes n ON n.id = e.child
            WHERE e.parent = \(FixedNode.cameraRoll) AND e.name = ?2
            AND EXISTS (SELECT 1 FROM (\(source)) v WHERE v.asset = e.child)
            """).bind(key ?? .null, .blob(name)).first { Self.decodeAttributes($0, from: 0) }
    }

    /// The first month (YYYY-MM) in [from, to) that has a live asset: index
    /// seeks month by month, so a listing never scans the library.
    func firstLiveMonth(from: String, to: String) throws -> String? {
        var from = from
        let next = try statement("SELECT min(month) FROM asset_facts WHERE month >= ?1 AND month < ?2")
        let live = try statement("""
            SELECT 1 FROM asset_facts f WHERE f.month = ?1
            AND EXISTS (SELECT 1 FROM entries e WHERE e.child = f.asset AND e.parent = \(FixedNode.cameraRoll)) LIMIT 1
            """)
        while let month = try next.bind(.text(from), .text(to)).first({ $0.optionalText(0) }) ?? nil {
            if try live.bind(.text(month)).first({ _ in true }) != nil { return month }
            from = month + "~"  // past every value of this month
        }
        return nil
    }

    /// Up to `limit` months in [from, to) that have live assets.
    func liveMonths(from: String, to: String, limit: Int) throws -> [String] {
        var months: [String] = []
        var from = from
        while months.count < limit, let month = try firstLiveMonth(from: from, to: to) {
            months.append(month)
            from = month + "~"
        }
        return months
    }
}

/// What of an asset's facts places it in the views' own directories.
struct ViewPlacement: Sendable {
    /// `YYYY-MM`: its By Date month.
    let month: String
    let sha256: String
}

/// The queries of the computed views: each gives a column `asset` (the
/// assets the view shows; ?1 is a key some of them take), served by an index.
enum ViewQueries {
    /// A pair shows once in the views (SEMANTICS.md § Pairs): by its still
    /// or its JPEG; its video or raw (`pairs.secondary`) is left out, but from
    /// RAW and Favorites (where `ln` and `rm` name either file).
    static let notSecondary = "asset NOT IN (SELECT member FROM pairs WHERE secondary = 1)"
    static let byMonth = "SELECT asset FROM asset_facts WHERE month = ?1 AND \(notSecondary)"
    static let videos = "SELECT asset FROM asset_facts WHERE kind = 'video' AND \(notSecondary)"
    static let screenshots = "SELECT asset FROM asset_facts WHERE screenshot = 1 AND \(notSecondary)"
    static let raw = "SELECT asset FROM asset_facts WHERE raw = 1"
    static let favorites = "SELECT asset FROM favorites"
    /// Assets saved over since they came in: those with an original kept.
    static let edited = "SELECT asset FROM originals"
    /// Both halves of each pair: a photo and a video with one content identifier.
    static let livePhotos = """
        SELECT f.asset AS asset FROM asset_facts f
        WHERE f.content_id IS NOT NULL AND f.kind IN ('photo', 'video')
        AND f.asset NOT IN (SELECT member FROM pairs WHERE secondary = 1)
        AND EXISTS (SELECT 1 FROM asset_facts p WHERE p.content_id = f.content_id
                    AND p.kind IN ('photo', 'video') AND p.kind <> f.kind
                    AND EXISTS (SELECT 1 FROM nodes n WHERE n.id = p.asset))
        """
    /// The assets of the set(s) whose SHA-256 starts with ?1 (a range of the
    /// sha256 index): only SHA-256s two live assets share, so two sets whose
    /// hashes begin alike never mix with a single asset.
    static let duplicateSet = """
        SELECT asset FROM asset_facts WHERE sha256 IN (
            SELECT f.sha256 FROM asset_facts f WHERE f.sha256 >= ?1 AND f.sha256 < ?1 || 'g'
            AND EXISTS (SELECT 1 FROM entries e WHERE e.child = f.asset AND e.parent = \(FixedNode.cameraRoll))
            GROUP BY f.sha256 HAVING count(*) > 1)
        """
}
