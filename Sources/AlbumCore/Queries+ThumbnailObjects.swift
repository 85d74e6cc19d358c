import SQLiteKit

/// The SQL of the thumbnails stored in the bucket beside their originals
/// (SEMANTICS.md § Thumbnails, "In the bucket"). Callers hold the library's
/// database lock.
extension Database {
    /// Thumbnails to store in the bucket: of assets whose object is there
    /// and whose facts (which made the thumbnail) were read from that same
    /// content; the newest imports first.
    func thumbnailsToStore(limit: Int) throws -> [(asset: NodeID, object: String, png: [UInt8])] {
        try statement("SELECT r.asset, r.sha256, t.png \(Self.thumbnailsToStoreRows) ORDER BY r.asset DESC LIMIT ?1")
            .bind(.int(Int64(limit))).all { (NodeID(bitPattern: $0.int64(0)), $0.text(1), $0.blob(2)) }
    }

    /// How many `thumbnailsToStore` would give, all told.
    func thumbnailsToStoreCount() throws -> Int64 {
        try scalarInt("SELECT count(*) \(Self.thumbnailsToStoreRows)")
    }

    private static let thumbnailsToStoreRows = """
        FROM remote_objects r
        JOIN asset_facts f ON f.asset = r.asset AND f.sha256 = r.sha256
        JOIN thumbnails t ON t.asset = r.asset
        WHERE r.thumbnail_sha256 IS NULL
        """

    /// The bucket holds `png`'s SHA-256 as the thumbnail beside `object`,
    /// if that is still the asset's object.
    func setThumbnailStored(_ asset: NodeID, object: String, sha256: String) throws {
        try statement("UPDATE remote_objects SET thumbnail_sha256 = ?3 WHERE asset = ?1 AND sha256 = ?2")
            .bind(.int(asset), .text(object), .text(sha256)).run()
    }
}
