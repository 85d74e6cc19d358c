import AlbumCore
import Glibc

/// `albumfs stats [--json] [--store DIR | MOUNTPOINT]`: what a library holds,
/// whether it is mounted and where. Reads the database only: instant on a
/// library of a million assets, and harmless while it is mounted.
struct StatsCommand {
    var store: String?
    var mountPoint: String?
    var json = false

    init(parsing arguments: [String]) throws(CommandFailure) {
        var json = false
        let target = try LibraryTarget(parsing: arguments, for: "stats") { option in
            guard option == "--json" else { return false }
            json = true
            return true
        }
        (store, mountPoint, self.json) = (target.store, target.mountPoint, json)
    }

    func run() throws(CommandFailure) -> Int32 {
        let location: StoreLocation
        if let mountPoint {
            let path = StoreLocation(path: mountPoint).root
            guard let source = Self.mounts().first(where: { $0.mountPoint == path })?.store else {
                throw CommandFailure(.usage, "\(path) is not an albumfs mount point (use --store DIR for a store)")
            }
            location = StoreLocation(path: source)
        } else {
            location = try storeLocation(store)
        }
        let statistics: StoreStatistics
        do {
            statistics = try StoreStatistics.read(location)
        } catch {
            throw CommandFailure(.unusableStore, describe(error))
        }
        let mounted = StoreLock.isHeld(location)
        let where_ = Self.mounts().filter { $0.store == location.root }.map(\.mountPoint)
        print(json ? Self.json(location, statistics, mounted, where_) : Self.text(location, statistics, mounted, where_))
        return ExitCode.success.rawValue
    }

    private static func text(_ location: StoreLocation, _ s: StoreStatistics, _ mounted: Bool, _ points: [String]) -> String {
        """
        store: \(location.root) (format \(s.schemaVersion))
        mounted: \(mounted ? "yes" + (points.isEmpty ? "" : ", on " + points.joined(separator: ", ")) : "no")
        assets: \(s.assets) (\(s.bytes) bytes): \(Self.kinds(s)); \(s.favorites) favorite\(s.favorites == 1 ? "" : "s")
        albums: \(s.albums)
        Recently Deleted: \(s.deletedAssets) (\(s.deletedBytes) bytes)
        side files: \(s.sideFiles)
        """ + (s.remote.map { remote in
            "\nremote: \(remote): \(s.objects) object\(s.objects == 1 ? "" : "s")"
            + "\nlocal: \(s.localBytes) bytes of originals on this disk; \(s.remoteOnlyAssets) only in the bucket (\(s.remoteOnlyBytes) bytes)"
            + "\nuploads waiting: \(s.uploadsPending) (\(s.uploadBytesPending) bytes)"
            + (s.oldestUploadQueued.map { ", the oldest queued \(Self.time($0))" } ?? "")
            + (s.lastRemoteError.map { "\nlast remote error: \($0)" + (s.lastRemoteErrorTime.map { " (\(Self.time($0)))" } ?? "") } ?? "")
        } ?? "")
    }

    /// A time as ISO 8601 UTC, to the second.
    private static func time(_ nanoseconds: Int64) -> String {
        var seconds = time_t(nanoseconds / 1_000_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%SZ", &parts)
        return String(cString: buffer)
    }

    private static func json(_ location: StoreLocation, _ s: StoreStatistics, _ mounted: Bool, _ points: [String]) -> String {
        let mountPoints = points.map(quoted).joined(separator: ", ")
        return """
            {"store": \(quoted(location.root)), "format": \(s.schemaVersion), "mounted": \(mounted), \
            "mount_points": [\(mountPoints)], "assets": \(s.assets), "bytes": \(s.bytes), "albums": \(s.albums), \
            "recently_deleted": {"assets": \(s.deletedAssets), "bytes": \(s.deletedBytes)}, "side_files": \(s.sideFiles), \
            "kinds": {\(["photo", "video", "audio", "other"].map { "\"\($0)\": \(s.kinds[$0] ?? 0)" }.joined(separator: ", ")), \
            "unread": \(s.unread)}, "favorites": \(s.favorites), "remote": \(s.remote.map(quoted) ?? "null"), \
            "uploads_pending": {"assets": \(s.uploadsPending), "bytes": \(s.uploadBytesPending), \
            "oldest_queued": \(s.oldestUploadQueued.map { quoted(time($0)) } ?? "null")}, "objects": \(s.objects), \
            "local_bytes": \(s.localBytes), "remote_only": {"assets": \(s.remoteOnlyAssets), "bytes": \(s.remoteOnlyBytes)}, \
            "last_remote_error": \(s.lastRemoteError.map(quoted) ?? "null"), \
            "last_remote_error_at": \(s.lastRemoteErrorTime.map { quoted(time($0)) } ?? "null")}
            """
    }

    /// "12 photos, 3 videos, 0 audio, 1 other, 2 not read yet".
    private static func kinds(_ s: StoreStatistics) -> String {
        let photos = s.kinds["photo"] ?? 0, videos = s.kinds["video"] ?? 0
        var parts = ["\(photos) photo\(photos == 1 ? "" : "s")", "\(videos) video\(videos == 1 ? "" : "s")",
                     "\(s.kinds["audio"] ?? 0) audio", "\(s.kinds["other"] ?? 0) other"]
        if s.unread > 0 { parts.append("\(s.unread) not read yet") }
        return parts.joined(separator: ", ")
    }

    /// A JSON string literal.
    private static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// The albumfs mounts of this system: (store, mount point), from /proc/self/mountinfo.
    static func mounts() -> [(store: String, mountPoint: String)] {
        guard let file = fopen("/proc/self/mountinfo", "r") else { return [] }
        defer { fclose(file) }
        var result: [(String, String)] = []
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL…] - FSTYPE SOURCE SUPER
            let fields = String(cString: line).split(separator: " ", omittingEmptySubsequences: false)
            guard let dash = fields.firstIndex(of: "-"), dash + 2 < fields.count, fields.count > 4,
                  fields[dash + 1] == "fuse.albumfs" else { continue }
            result.append((unescape(fields[dash + 2]), unescape(fields[4])))
        }
        return result
    }

    /// The kernel's octal escapes (\040 for a space, …).
    private static func unescape(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        var iterator = Array(field.utf8)[...]
        while let byte = iterator.popFirst() {
            if byte == 0x5c, iterator.count >= 3, let value = UInt8(String(decoding: iterator.prefix(3), as: UTF8.self), radix: 8) {
                bytes.append(value)
                iterator = iterator.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
