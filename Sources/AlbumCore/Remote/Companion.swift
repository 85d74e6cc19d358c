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
                     "chunks \(digest.chunks.map { Self.hex($0) } ?? "-")", "modified \(modified)",
                     "mode \(mode)", "uid \(uid)", "gid \(gid)", "uploaded \(uploaded)", "favorite \(favorite ? 1 : 0)",
                     "roll \(Self.hex(rollName))"]
        for path in albums { lines.append("album " + path.map { Self.hex($0) }.joined(separator: "/")) }
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
                    guard let name = Self.bytes(fromHex: part), !name.isEmpty else { throw .invalidArgument }
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
              let rollName = fields["roll"].flatMap({ Self.bytes(fromHex: Substring($0)) }), !rollName.isEmpty else { return nil }
        let chunkDigests = chunks == "-" ? nil : Self.bytes(fromHex: Substring(chunks))
        if chunks != "-" && chunkDigests == nil { return nil }
        self.init(asset: asset, digest: ObjectDigest(sha256: sha256, size: size, chunks: chunkDigests), modified: modified,
                  mode: mode & 0o7777, uid: uid, gid: gid, uploaded: uploaded, favorite: favorite == "1", rollName: rollName,
                  albums: albums)
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes { out.append(digits[Int(byte >> 4)]); out.append(digits[Int(byte & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }

    private static func bytes(fromHex text: Substring) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: return c - 0x30
            case 0x61...0x66: return c - 0x61 + 10
            default: return nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2)
        var i = 0
        while i < utf8.count {
            guard let high = value(utf8[i]), let low = value(utf8[i + 1]) else { return nil }
            out.append(high << 4 | low)
            i += 2
        }
        return out
    }
}
