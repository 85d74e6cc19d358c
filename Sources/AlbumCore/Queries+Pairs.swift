import SQLiteKit

/// The SQL of pairs: a Live Photo's still and video, a RAW+JPEG shot.
/// SEMANTICS.md § Pairs.
extension Database {
    func partner(of member: NodeID) throws -> NodeID? {
        try statement("SELECT partner FROM pairs WHERE member = ?1").bind(.int(member))
            .first { NodeID(bitPattern: $0.int64(0)) }
    }

    /// Pairs `primary` (the still, the JPEG) with `secondary` (the video, the raw).
    func insertPair(primary: NodeID, secondary: NodeID) throws {
        let insert = try statement("INSERT INTO pairs(member, partner, secondary) VALUES (?1, ?2, ?3)")
        try insert.bind(.int(primary), .int(secondary), .int(0)).run()
        try insert.bind(.int(secondary), .int(primary), .int(1)).run()
    }

    func isSecondary(_ member: NodeID) throws -> Bool {
        try statement("SELECT secondary FROM pairs WHERE member = ?1").bind(.int(member)).first { $0.int(0) != 0 } ?? false
    }

    func deletePair(of member: NodeID) throws {
        try statement("DELETE FROM pairs WHERE member = ?1 OR partner = ?1").bind(.int(member)).run()
    }

    /// `replaced`'s place in its pair goes to `moving` (an edit of one half).
    func handOverPair(from replaced: NodeID, to moving: NodeID) throws {
        guard let partner = try partner(of: replaced) else { return }
        let secondary = try isSecondary(replaced)
        try deletePair(of: replaced)
        try insertPair(primary: secondary ? partner : moving, secondary: secondary ? moving : partner)
    }

    /// Live, unpaired assets whose facts carry Apple content identifier
    /// `identifier` and are of `kind` (`photo` or `video`).
    func livePhotoCandidates(identifier: String, kind: AssetFacts.Kind) throws -> [NodeID] {
        let statement = try self.statement("""
            SELECT f.asset FROM asset_facts f
            WHERE f.content_id = ?1 AND f.kind = ?2
            AND EXISTS (SELECT 1 FROM entries e WHERE e.child = f.asset AND e.parent = \(FixedNode.cameraRoll))
            AND NOT EXISTS (SELECT 1 FROM pairs p WHERE p.member = f.asset)
            ORDER BY f.asset
            """)
        try statement.bind(.text(identifier), .text(kind.rawValue))
        var ids: [NodeID] = []
        while try statement.step() { ids.append(NodeID(bitPattern: statement.int64(0))) }
        return ids
    }

    /// Roll entries named `stem.EXT` (one extension, no further dot), with
    /// what a RAW+JPEG pairing needs of them: unpaired, with their facts.
    func rollNamesWithStem(_ stem: Name) throws -> [(id: NodeID, name: Name, raw: Bool, type: String?, captured: String?, imported: Nanoseconds)] {
        let statement = try self.statement("""
            SELECT e.child, e.name, f.raw, f.type, f.captured, n.imported FROM entries e
            JOIN asset_facts f ON f.asset = e.child JOIN nodes n ON n.id = e.child
            WHERE e.parent = \(FixedNode.cameraRoll) AND e.name > ?1 AND e.name < ?2
            AND NOT EXISTS (SELECT 1 FROM pairs p WHERE p.member = e.child)
            """)
        // Names that begin with `stem.`: between `stem.` and `stem/` ('/' follows '.').
        try statement.bind(.blob(stem + [0x2e]), .blob(stem + [0x2f]))
        var rows: [(NodeID, Name, Bool, String?, String?, Nanoseconds)] = []
        while try statement.step() {
            rows.append((NodeID(bitPattern: statement.int64(0)), statement.blob(1), statement.int(2) != 0,
                         statement.optionalText(3), statement.optionalText(4), statement.int64(5)))
        }
        return rows
    }

    func importTime(of id: NodeID) throws -> Nanoseconds? {
        try statement("SELECT imported FROM nodes WHERE id = ?1").bind(.int(id)).first { $0.int64(0) }
    }
}
