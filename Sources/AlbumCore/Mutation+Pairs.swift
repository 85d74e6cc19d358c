import SQLiteKit

/// Pairs: a Live Photo's still and video, a RAW+JPEG shot, one asset with
/// two files. SEMANTICS.md § Pairs.
///
/// Each half stays a node with its own entries, data and facts; a `pairs`
/// row each way ties them. Every operation that adds the asset to a
/// directory, or takes it out, does the same to the partner in the same
/// transaction (the hooks in Mutation+Delete, Mutation+Hidden,
/// Library+Rename and Library+Entries call the helpers below).
extension Mutation {
    /// Two files taken together within this many nanoseconds (and no
    /// capture time of both to compare) are a RAW+JPEG shot.
    static let pairingWindow: Nanoseconds = 60 * 1_000_000_000

    // MARK: pairing

    /// Once `id`'s facts (`facts`) are recorded: pairs it with its other
    /// half, when exactly one live, unpaired asset is that (SEMANTICS.md §
    /// Pairs). `rollName`: its roll name now (nil: not in the roll, no pair).
    mutating func pairIfPartnered(_ id: NodeID, rollName: Name?, facts: AssetFacts) throws {
        guard let rollName, try db.partner(of: id) == nil,
              let found = try findPartner(of: id, rollName, facts) else { return }
        try pair(primary: found.secondary ? found.partner : id, secondary: found.secondary ? id : found.partner)
    }

    /// Its partner, and whether `id` is the pair's secondary file (the video, the raw).
    private func findPartner(of id: NodeID, _ rollName: Name, _ facts: AssetFacts) throws -> (partner: NodeID, secondary: Bool)? {
        guard let partner = try findPartnerFile(of: id, rollName, facts) else { return nil }
        return (partner, facts.kind == .video || facts.isRaw)
    }

    private func findPartnerFile(of id: NodeID, _ rollName: Name, _ facts: AssetFacts) throws -> NodeID? {
        if let identifier = facts.contentIdentifier, facts.kind == .photo || facts.kind == .video {
            let candidates = try db.livePhotoCandidates(identifier: identifier, kind: facts.kind == .photo ? .video : .photo)
                .filter { $0 != id }
            return candidates.count == 1 ? candidates[0] : nil
        }
        let isJPEG = facts.type == "image/jpeg" && !facts.isRaw
        guard facts.isRaw || isJPEG, let dot = rollName.lastIndex(of: 0x2e), dot > 0 else { return nil }
        let stem = Array(rollName[..<dot])
        let imported = try db.importTime(of: id) ?? 0
        let matches = try db.rollNamesWithStem(stem).filter { row in
            guard row.id != id, !row.name[(stem.count + 1)...].contains(0x2e) else { return false }
            let otherHalf = facts.isRaw ? (row.type == "image/jpeg" && !row.raw) : row.raw
            let together = (facts.captured != nil && row.captured == facts.captured)
                || abs(row.imported - imported) <= Self.pairingWindow
            return otherHalf && together
        }
        return matches.count == 1 ? matches[0].id : nil
    }

    /// Makes `primary` (the still, the JPEG) and `secondary` (the video, the
    /// raw) one asset: one identifier (the older one's), the union of their
    /// albums, and the favorite flag if either had it. The views leave the
    /// secondary out from now on: the names they showed of it go.
    mutating func pair(primary: NodeID, secondary: NodeID) throws {
        let (a, b) = (primary, secondary)
        if let rollName = try db.name(of: secondary, in: roll) {
            for entry in try ComputedViews.names(of: secondary, rollName: rollName, db) { changes.entry(entry.directory, entry.name) }
        }
        try db.insertPair(primary: primary, secondary: secondary)
        let (first, second) = a < b ? (a, b) : (b, a)
        try db.setAssetIdentifier(of: second, to: try db.assetIdentifier(of: first))
        for (from, to) in [(a, b), (b, a)] {
            for (directory, _) in try db.entries(of: from) where try db.kind(of: directory) == .album {
                try addPartner(to, to: directory)
            }
        }
        if try db.isFavorite(a) || db.isFavorite(b) {
            try db.setFavorite(a, true)
            try db.setFavorite(b, true)
        }
    }

    /// `setfattr -n user.albumfs.unpair -v 1`: two assets again, each in the
    /// albums the pair was in; the younger takes its own identifier back
    /// (its original's, if it was edited).
    mutating func unpair(_ member: NodeID) throws {
        guard let partner = try db.partner(of: member) else { return }
        try db.deletePair(of: member)
        let second = max(member, partner)
        try db.setAssetIdentifier(of: second, to: try db.original(of: second) ?? second)
        changes.node(member)
        changes.node(partner)
    }

    // MARK: the partner follows

    /// Adds `partner` to `album` (under its roll name, the (n) rule on a
    /// clash) unless the album holds it already.
    mutating func addPartner(_ partner: NodeID, to album: NodeID) throws {
        guard try db.name(of: partner, in: album) == nil, let rollName = try db.name(of: partner, in: roll) else { return }
        try db.insertEntry(album, try db.freeName(in: album, for: rollName), partner)
        try touched(album)
        try db.touchChangeTime(partner, now: now)
        changes.node(partner)
    }

    /// Takes `partner` out of `album`, if it is there.
    mutating func dropPartner(_ partner: NodeID, from album: NodeID) throws {
        guard let name = try db.name(of: partner, in: album) else { return }
        try deleteEntry(album, name)
        try vanished(album, name)
        try db.touchChangeTime(partner, now: now)
        changes.node(partner)
    }

    /// Moves `partner`'s entry in `from` to `to` (the (n) rule on a clash), if it is in `from`.
    mutating func movePartner(_ partner: NodeID, from: NodeID, to: NodeID) throws {
        guard let name = try db.name(of: partner, in: from) else { return }
        if try db.name(of: partner, in: to) != nil {
            try dropPartner(partner, from: from)
            return
        }
        try moveEntry(from, name, to: to, try db.freeName(in: to, for: name))
        try vanished(from, name)
        try touched(to)
        changes.node(partner)
    }

    /// Whether `asset` is live and shown: in the roll or in Hidden/.
    func isShown(_ asset: NodeID) throws -> Bool {
        try db.name(of: asset, in: roll) != nil || db.name(of: asset, in: hidden) != nil
    }
}
