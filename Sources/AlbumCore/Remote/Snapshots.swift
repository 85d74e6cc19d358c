#if canImport(Glibc)
import Glibc
#endif
import SQLiteKit
import Zstd

/// The metadata's snapshots in the bucket (SEMANTICS.md § Surviving the
/// machine): `snapshots/YYYYMMDDTHHMMSSmmmZ.db.zst`, one PUT each (whole or
/// absent), named by when they were taken to the millisecond, so that the
/// names sort by time and two snapshots of one second are two objects (a
/// second device tells a newer snapshot by its name).
public enum Snapshots {
    public static let prefix = "snapshots/"
    static let suffix = ".db.zst"

    /// The key of a snapshot taken at `time` (nanoseconds since the epoch, UTC).
    static func key(at time: Nanoseconds) -> String {
        prefix + stamp(time) + suffix
    }

    /// `YYYYMMDDTHHMMSSmmmZ`.
    static func stamp(_ time: Nanoseconds) -> String {
        var seconds = time_t(time / 1_000_000_000)
        let milliseconds = Int(time / 1_000_000 % 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let thousandths = milliseconds < 10 ? "00\(milliseconds)" : milliseconds < 100 ? "0\(milliseconds)" : "\(milliseconds)"
        return "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))T\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))\(thousandths)Z"
    }

    /// The `YYYYMMDDTHHMMSSmmmZ` of a snapshot's key.
    static func stamp(ofKey key: String) -> String {
        String(key.dropFirst(prefix.count).dropLast(suffix.count))
    }

    /// When the snapshot `key` was taken, in seconds (nil: not a snapshot's key).
    public static func time(of key: String) -> Int? {
        guard key.hasPrefix(prefix), key.hasSuffix(suffix) else { return nil }
        let stamp = Array(key.dropFirst(prefix.count).dropLast(suffix.count).utf8)
        guard stamp.count == 19, stamp[8] == UInt8(ascii: "T"), stamp[18] == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            let digits = stamp[range]
            guard digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return digits.reduce(Int32(0)) { $0 * 10 + Int32($1 - 0x30) }
        }
        guard let year = number(0..<4), let month = number(4..<6), let day = number(6..<8),
              let hour = number(9..<11), let minute = number(11..<13), let second = number(13..<15), number(15..<18) != nil else { return nil }
        var parts = tm()
        (parts.tm_year, parts.tm_mon, parts.tm_mday) = (year - 1900, month - 1, day)
        (parts.tm_hour, parts.tm_min, parts.tm_sec) = (hour, minute, second)
        let time = timegm(&parts)
        return time < 0 ? nil : Int(time)
    }

    /// The snapshots to delete of those taken at `times` (seconds), now
    /// being `now`: every one of the last 24 hours is kept, then the newest
    /// of each day for a week, of each week for five weeks, and of each
    /// 30 days for a year; the newest of all always.
    static func expired(_ times: [Int], now: Int) -> Set<Int> {
        let day = 86_400
        let tiers: [(within: Int, bucket: Int)] = [(7 * day, day), (35 * day, 7 * day), (365 * day, 30 * day)]
        var kept: Set<Int> = []
        if let newest = times.max() { kept.insert(newest) }
        var newestIn: [String: Int] = [:]
        for time in times {
            let age = now - time
            if age < day { kept.insert(time); continue }
            guard let tier = tiers.firstIndex(where: { age < $0.within }) else { continue }
            let slot = "\(tier)/\(time / tiers[tier].bucket)"
            if time > newestIn[slot] ?? Int.min { newestIn[slot] = time }
        }
        kept.formUnion(newestIn.values)
        return Set(times).subtracting(kept)
    }

    /// Takes a snapshot of the store at `location` and stores it in the
    /// bucket as `key(at: time)` (nanoseconds): the database's rows read in
    /// one transaction (every table but the thumbnails; SnapshotFormat),
    /// compressed as they are read into a scratch file in the store's
    /// directory (removed after; one a crash left is overwritten), one PUT.
    /// Returns the key and the compressed size.
    /// `copying`: run inside the copy's read transaction (a pause point).
    static func take(of location: StoreLocation, at time: Nanoseconds, into backend: any ObjectBackend,
                     copying: () throws -> Void = {}) throws -> (key: String, bytes: Int64) {
        let packedPath = location.root + "/snapshot.zst"
        defer { _ = unlink(packedPath) }
        _ = unlink(location.root + "/snapshot.db")   // a page copy an older version's crash left
        let packed = open(packedPath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard packed >= 0 else { throw LibraryError(errno: errno) }
        defer { close(packed) }
        let writer = try Zstd.Writer(packed)
        var encoder = SnapshotEncoder(sink: writer.write)
        try Database.writeSnapshot(of: location.databasePath, into: &encoder, copying: copying)
        try writer.finish()
        let length = Int64(lseek(packed, 0, SEEK_END))
        guard lseek(packed, 0, SEEK_SET) == 0 else { throw LibraryError(errno: errno) }
        let key = key(at: time)
        try backend.put(key, file: packed, length: length)
        return (key, length)
    }

    /// Deletes the snapshots `expired` names, newest kept (after one was taken now).
    static func prune(_ backend: any ObjectBackend, now: Int) throws -> Int {
        let keys = try backend.list(prefix).map(\.key).compactMap { key in time(of: key).map { (key, $0) } }
        let doomed = expired(keys.map(\.1), now: now)
        var removed = 0
        for (key, time) in keys where doomed.contains(time) {
            try backend.remove(key)
            removed += 1
        }
        return removed
    }
}
