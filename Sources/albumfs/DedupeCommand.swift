import AlbumCore
import Glibc

/// `albumfs dedupe [--dry-run] [--store DIR | MOUNTPOINT]`: merges each set of
/// identical assets as Photos' "Merge" does (Library.dedupe: the earliest
/// import kept, in every album of the set, the others to Recently Deleted).
/// Only members whose data hashes to the set's SHA-256 again, and that
/// nothing is writing, take part. A mounted library is merged through its
/// mount, one set at a time: the daemon says which members it would merge
/// and which it keeps (`getfattr -n user.albumfs.merge` on the set's
/// directory), then merges (`setfattr`), each one transaction; an unmounted
/// one directly. Only assets whose facts were read (while mounted) are
/// proposed.
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
            sets = try withExtendedLifetime(lock) { () throws(LibraryError) in
                try library.dedupe(dryRun: dryRun, hashing: MediaFactsReader())
            }
        } catch {
            throw CommandFailure(.unusableStore, describe(error))
        }
        for set in sets { report(kept: set.keptName, merged: set.merged.map(\.name)) }
        return summary(sets.count)
    }

    /// Through the mount: each set's `user.albumfs.merge` names the members
    /// the daemon would merge now, the one it keeps first (NUL after each).
    private func throughMount(_ point: String) throws(CommandFailure) -> Int32 {
        let duplicates = BytePath(point).appending("Smart Albums/Duplicates")
        guard case .success(let sets) = duplicates.directoryEntries() else {
            throw CommandFailure(.usage, "\(point) is not a mounted albumfs library (no \(duplicates))")
        }
        var merged = 0
        for set in sets.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            let directory = duplicates.appending(set)
            // None: the set went, or fewer than two members are proven identical now.
            guard let plan = directory.extendedAttributeBytes("user.albumfs.merge") else { continue }
            let names = plan.split(separator: 0, omittingEmptySubsequences: false).dropLast().map(Array.init)
            guard names.count > 1 else { continue }
            report(kept: names[0], merged: Array(names.dropFirst()))
            if !dryRun {
                let done = directory.withCString { systemSetxattr($0, "user.albumfs.merge", "1", 1, 0) }
                guard done == 0 else {
                    throw CommandFailure(.problemsFound, "cannot merge \(directory): \(String(cString: strerror(errno)))")
                }
            }
            merged += 1
        }
        return summary(merged)
    }

    private func report(kept: Name, merged: [Name]) {
        let text = { (name: Name) in String(decoding: name, as: UTF8.self) }
        print("\(dryRun ? "would keep" : "kept") \(text(kept)); \(dryRun ? "would merge" : "merged") \(merged.map(text).joined(separator: ", "))")
    }

    private func summary(_ count: Int) -> Int32 {
        print("\(count) set\(count == 1 ? "" : "s") of duplicates\(dryRun ? " (dry run: nothing changed)" : " merged")")
        return ExitCode.success.rawValue
    }
}

/// setxattr(2), from <sys/xattr.h>, which the Glibc module does not export.
@_silgen_name("setxattr")
private func systemSetxattr(_ path: UnsafePointer<CChar>, _ name: UnsafePointer<CChar>, _ value: UnsafeRawPointer?,
                            _ size: Int, _ flags: Int32) -> Int32
