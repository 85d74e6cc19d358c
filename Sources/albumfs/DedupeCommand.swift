import AlbumCore
import Glibc

/// `albumfs dedupe [--dry-run] [--store DIR | MOUNTPOINT]`: merges each set of
/// identical assets as Photos' "Merge" does (Library.dedupe: the earliest
/// import kept, in every album of the set, the others to Recently Deleted).
/// A mounted library is merged through its mount, one set at a time (each
/// one transaction of the daemon: `user.albumfs.merge` on the set's
/// directory); an unmounted one directly. Only assets whose facts were read
/// (while mounted) take part.
struct DedupeCommand {
    var store: String?
    var mountPoint: String?
    var dryRun = false

    init(parsing arguments: [String]) throws(CommandFailure) {
        var dryRun = false
        let target = try LibraryTarget(parsing: arguments, for: "dedupe") { option in
            guard option == "--dry-run" || option == "-n" else { return false }
            dryRun = true
            return true
        }
        (store, mountPoint, self.dryRun) = (target.store, target.mountPoint, dryRun)
    }

    func run() throws(CommandFailure) -> Int32 {
        if let mountPoint { return try throughMount(StoreLocation(path: mountPoint).root) }
        let location = try storeLocation(store)
        if let point = StatsCommand.mounts().first(where: { $0.store == location.root })?.mountPoint {
            return try throughMount(point)
        }
        let sets: [Library.DuplicateSet]
        do {
            let lock = try StoreLock(location: location)
            let library = try Library(location: location, owner: Caller(uid: getuid(), gid: getgid()))
            sets = try withExtendedLifetime(lock) { () throws(LibraryError) in try library.dedupe(dryRun: dryRun) }
        } catch {
            throw CommandFailure(.unusableStore, describe(error))
        }
        for set in sets {
            report(kept: String(decoding: set.keptName, as: UTF8.self),
                   merged: set.merged.map { String(decoding: $0.name, as: UTF8.self) })
        }
        return summary(sets.count)
    }

    /// Through the mount: each set's directory lists its members (roll names);
    /// the lowest st_ino is the earliest import.
    private func throughMount(_ point: String) throws(CommandFailure) -> Int32 {
        let duplicates = point + "/Smart Albums/Duplicates"
        guard let sets = Self.names(in: duplicates) else {
            throw CommandFailure(.usage, "\(point) is not a mounted albumfs library (no \(duplicates))")
        }
        var merged = 0
        for set in sets.sorted() {
            let directory = duplicates + "/" + set
            let members = (Self.names(in: directory) ?? []).compactMap { name -> (UInt64, String)? in
                var info = stat()
                return lstat(directory + "/" + name, &info) == 0 ? (UInt64(info.st_ino), name) : nil
            }.sorted { $0.0 < $1.0 }
            guard members.count > 1 else { continue }
            report(kept: members[0].1, merged: members.dropFirst().map(\.1))
            if !dryRun {
                guard systemSetxattr(directory, "user.albumfs.merge", "1", 1, 0) == 0 else {
                    throw CommandFailure(.problemsFound, "cannot merge \(directory): \(String(cString: strerror(errno)))")
                }
            }
            merged += 1
        }
        return summary(merged)
    }

    private func report(kept: String, merged: [String]) {
        print("\(dryRun ? "would keep" : "kept") \(kept); \(dryRun ? "would merge" : "merged") \(merged.joined(separator: ", "))")
    }

    private func summary(_ count: Int) -> Int32 {
        print("\(count) set\(count == 1 ? "" : "s") of duplicates\(dryRun ? " (dry run: nothing changed)" : " merged")")
        return ExitCode.success.rawValue
    }

    private static func names(in path: String) -> [String]? {
        guard let directory = opendir(path) else { return nil }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}

/// setxattr(2), from <sys/xattr.h>, which the Glibc module does not export.
@_silgen_name("setxattr")
private func systemSetxattr(_ path: UnsafePointer<CChar>, _ name: UnsafePointer<CChar>, _ value: UnsafeRawPointer?,
                            _ size: Int, _ flags: Int32) -> Int32
