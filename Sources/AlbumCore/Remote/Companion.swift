import SQLiteKit

/// What the bucket keeps of one uploaded asset besides its bytes, at
/// `assets/ID` (SEMANTICS.md § Surviving the machine): enough for a recovery
/// to put back an asset uploaded after the last snapshot. Written after the
/// original is stored and before the upload is recorded; deleted when the
/// asset is purged. Text, one field a line; names in hex (they are bytes).
struct Companion: Equatable {
    var asset: NodeID
    var digest: ObjectDigest
    var modified: Nanoseconds
    var mode: UInt32
    var uid: UInt32
    var gid: UInt32
    /// When it was uploaded (the store's clock, seconds).
    var uploaded: Int
    var favorite: Bool
    var rollName: Name
    /// Each album's path under Albums/, the asset's name in it last.
    var albums: [[Name]]

    static let prefix = "assets/"
    static func key(of asset: NodeID) -> String { prefix + String(asset) }

    /// The asset id a key names (nil: not a companion's key).
    static func asset(ofKey key: String) -> NodeID? {
        key.hasPrefix(prefix) ? NodeID(key.dropFirst(prefix.count)) : nil
    }

    /// The companion of live asset `asset`, uploaded as `digest` from data of
    /// mtime `modified`, at `uploaded` (the store's clock, seconds).
    static func of(_ asset: NodeID, _ digest: ObjectDigest, modified: Nanoseconds, uploaded: Int, _ db: Database) throws -> Companion? {
        guard let fields = try db.companionFields(of: asset) else { return nil }
        return Companion(asset: asset, digest: digest, modified: modified, mode: fields.attributes.mode,
                         uid: fields.attributes.uid, gid: fields.attributes.gid, uploaded: uploaded,
                         favorite: fields.favorite, rollName: fields.rollName, albums: fields.albums)
    }

    func encoded() -> [UInt8] {
        var lines = ["albumfs-companion 1", "asset \(asset)", "sha256 \(digest.sha256)", "size \(digest.size)",
                     "chunks \(digest.chunks.map { FactsLine.hex($0) } ?? "-")", "modified \(modified)",
                     "mode \(mode)", "uid \(uid)", "gid \(gid)", "uploaded \(uploaded)", "favorite \(favorite ? 1 : 0)",
                     "roll \(FactsLine.hex(rollName))"]
        for path in albums { lines.append("album " + path.map { FactsLine.hex($0) }.joined(separator: "/")) }
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }

}

extension Companion {
    /// A companion's bytes read back; nil if they are not one (a foreign or damaged object).
    init?(decoding bytes: [UInt8]) {
        var fields: [String: String] = [:]
        var albums: [[Name]] = []
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
        guard lines.first == "albumfs-companion 1" else { return nil }
        for line in lines.dropFirst() {
            guard let space = line.firstIndex(of: " ") else { return nil }
            let (name, value) = (String(line[..<space]), String(line[line.index(after: space)...]))
            if name == "album" {
                guard let path = try? value.split(separator: "/").map({ part throws(LibraryError) -> Name in
                    guard let name = FactsLine.bytes(hex: part.utf8), !name.isEmpty else { throw .invalidArgument }
                    return name
                }), path.count >= 2 else { return nil }
                albums.append(path)
            } else {
                fields[name] = value
            }
        }
        guard let asset = fields["asset"].flatMap({ NodeID($0) }), let sha256 = fields["sha256"], sha256.count == 64,
              let size = fields["size"].flatMap({ Int64($0) }), let chunks = fields["chunks"],
              let modified = fields["modified"].flatMap({ Nanoseconds($0) }), let mode = fields["mode"].flatMap({ UInt32($0) }),
              let uid = fields["uid"].flatMap({ UInt32($0) }), let gid = fields["gid"].flatMap({ UInt32($0) }),
              let uploaded = fields["uploaded"].flatMap({ Int($0) }), let favorite = fields["favorite"],
              let rollName = fields["roll"].flatMap({ FactsLine.bytes(hex: Substring($0).utf8) }), !rollName.isEmpty else { return nil }
        let chunkDigests = chunks == "-" ? nil : FactsLine.bytes(hex: Substring(chunks).utf8)
        if chunks != "-" && chunkDigests == nil { return nil }
        self.init(asset: asset, digest: ObjectDigest(sha256: sha256, size: size, chunks: chunkDigests), modified: modified,
                  mode: mode & 0o7777, uid: uid, gid: gid, uploaded: uploaded, favorite: favorite == "1", rollName: rollName,
                  albums: albums)
    }
}
