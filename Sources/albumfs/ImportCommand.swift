import AlbumCore
import Glibc

/// `albumfs import [--album PATH] [--mount MNT | --store DIR] SOURCE…`:
/// copies the photos and videos under each SOURCE (a phone's DCIM, a camera
/// card, an old archive) into the library's roll, or into `Albums/PATH/`
/// (made if missing; the roll gets them too), keeping modification times
/// and skipping files whose SHA-256 the library already has (see Importer).
///
/// Always through a mount: the one given, the store's own mount if it is
/// mounted, else a private one made for the import (PrivateMount), which
/// is unmounted whatever happens. A second run after Ctrl-C copies only
/// what is missing.
///
/// Exit status: 0 when every photo and video was imported or was a
/// duplicate (other files are skipped and counted); 1 when some failed;
/// 128 + the signal (130 for Ctrl-C) when interrupted; 2, 3, 4 as for the
/// other commands.
struct ImportCommand {
    var store: String?
    var mountPoint: String?
    var album: [String]?
    var sources: [String] = []

    init(parsing arguments: [String]) throws(CommandFailure) {
        var reader = ArgumentReader(arguments)
        var optionsEnded = false
        while let argument = reader.next() {
            switch argument {
            case _ where optionsEnded || !argument.hasPrefix("-") || argument == "-": sources.append(argument)
            case "--": optionsEnded = true
            case _ where argument.hasPrefix("--store"): store = try reader.value(of: "--store", in: argument)
            case _ where argument.hasPrefix("--mount"): mountPoint = try reader.value(of: "--mount", in: argument)
            case _ where argument.hasPrefix("--album"): album = try Self.albumPath(try reader.value(of: "--album", in: argument))
            default: throw .usage("unknown import argument \(argument)")
            }
        }
        if store != nil && mountPoint != nil { throw .usage("give --mount MNT or --store DIR, not both") }
        if sources.isEmpty { throw .usage("expected at least one SOURCE folder or file") }
    }

    /// `Trips/2024` → ["Trips", "2024"], inside `Albums/`.
    private static func albumPath(_ text: String) throws(CommandFailure) -> [String] {
        let parts = text.split(separator: "/").map(String.init)
        guard !parts.isEmpty, !parts.contains("."), !parts.contains("..") else {
            throw .usage("--album takes a path inside Albums/, like Trips/2024")
        }
        return parts
    }

    func run() throws(CommandFailure) -> Int32 {
        for source in sources where BytePath(source).status(followingLinks: true) == nil {
            throw CommandFailure(.usage, "\(source): \(SystemError("stat"))")
        }
        Interruption.install()
        if let mountPoint {
            let point = StoreLocation(path: mountPoint).root
            guard StatsCommand.mounts().contains(where: { $0.mountPoint == point }) else {
                throw CommandFailure(.usage, "\(point) is not an albumfs mount point")
            }
            return try importThrough(point)
        }
        let location = try storeLocation(store)
        if let point = StatsCommand.mounts().first(where: { $0.store == location.root })?.mountPoint {
            return try importThrough(point)
        }
        let mount = try PrivateMount.mount(store: store)
        defer { mount.unmount() }
        return try importThrough(mount.point)
    }

    private func importThrough(_ point: String) throws(CommandFailure) -> Int32 {
        let root = BytePath(point)
        guard let rootInfo = root.status(followingLinks: true) else {
            throw CommandFailure(.usage, "\(point): \(SystemError("stat"))")
        }
        let (destination, label) = try destination(in: root)

        var walkFailures: [String] = []
        let files = Importer.walk(sources.map(BytePath.init), excludingDevice: UInt64(rootInfo.st_dev), failures: &walkFailures)
        let total = ImportProgress.Totals(files: files.count, bytes: files.reduce(0) { $0 + $1.size })
        let progress = ImportProgress(total: total)
        for failure in walkFailures { toStandardError("albumfs: cannot read \(failure)\n") }

        // What the library has: wait for its daemon to read every asset.
        var known: [String: BytePath] = [:]
        let waited = LibraryHashes.waitForIndexing(of: root) { left in
            progress.note("waiting for the library to read \(left) asset\(left == 1 ? "" : "s") (their SHA-256)")
        }
        if waited {
            switch LibraryHashes.collect(roll: root.appending("Camera Roll")) {
            case .failure(let error):
                throw CommandFailure(.problemsFound, "cannot list the library's Camera Roll: \(error)")
            case .success(let collected):
                for failure in collected.failures { toStandardError("albumfs: cannot hash \(failure) (a copy of it may be imported)\n") }
                known = collected.hashes
            }
        }

        let importer = Importer(destination: destination, label: label, known: known, intoAlbum: album != nil, progress: progress)
        var stop: Importer.Stop?
        if Interruption.received != nil {
            stop = .interrupted
        } else {
            do { try importer.run(files) } catch { stop = error }
        }
        // Live Photos and RAW+JPEG shots are paired once the daemon has read
        // both halves: the import returns with them paired (SEMANTICS.md § Pairs).
        if importer.counts.pairHalves > 0 && stop == nil {
            _ = LibraryHashes.waitForIndexing(of: root) { left in
                progress.note("pairing Live Photos and RAW+JPEG shots: \(left) file\(left == 1 ? "" : "s") left to read")
            }
        }
        if importer.counts.imported > 0 { Self.synchronize(storeMountedOn: point) }
        return Self.finish(importer.counts, walkFailures: walkFailures.count, of: files.count, stop: stop, progress)
    }

    /// Prints the summary line and gives the exit status.
    private static func finish(_ c: Importer.Counts, walkFailures: Int, of files: Int, stop: Importer.Stop?,
                               _ progress: ImportProgress) -> Int32 {
        let failed = c.failed + walkFailures
        let summary = "\(c.imported) imported (\(ImportProgress.mebibytes(c.importedBytes)) MiB), "
            + "\(c.duplicates) duplicate\(c.duplicates == 1 ? "" : "s") skipped, "
            + "\(c.other) other file\(c.other == 1 ? "" : "s") skipped (not photos or videos), "
            + "\(failed) failed, in \(String(format1: progress.elapsed)) s"
        switch stop {
        case .interrupted:
            let left = files - c.imported - c.duplicates - c.other - c.failed
            progress.summary("interrupted (\(left) not looked at: run the same import again to finish): " + summary)
            return 128 + (Interruption.received ?? SIGINT)
        case .library(let message):
            progress.summary("stopped: \(message): " + summary)
            return ExitCode.problemsFound.rawValue
        case nil:
            progress.summary(summary)
            return failed == 0 ? ExitCode.success.rawValue : ExitCode.problemsFound.rawValue
        }
    }

    /// What was imported survives a power loss once the command returns:
    /// one syncfs(2) of the store's file system (the content files and the
    /// database's WAL), where an fsync of each file through the mount cost
    /// 7.9 ms a file, 60% of the time of an import of 500 small photos.
    /// A store this user cannot open: sync(2).
    private static func synchronize(storeMountedOn point: String) {
        if let store = StatsCommand.mounts().first(where: { $0.mountPoint == point })?.store {
            let fd = open(store, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if fd >= 0 {
                defer { close(fd) }
                if systemSyncfs(fd) == 0 { return }
            }
        }
        sync()
    }

    /// `Camera Roll/`, or `Albums/PATH/` (made, as mkdir -p does).
    private func destination(in root: BytePath) throws(CommandFailure) -> (BytePath, String) {
        guard let album else { return (root.appending("Camera Roll"), "Camera Roll") }
        var path = root.appending("Albums")
        for part in album {
            path = path.appending(part)
            let rc = path.withCString { mkdir($0, 0o755) }
            if rc != 0 && errno != EEXIST {
                throw CommandFailure(.problemsFound, "cannot make the album \(path): \(SystemError("mkdir"))")
            }
            guard let info = path.status(followingLinks: true), info.st_mode & S_IFMT == S_IFDIR else {
                throw CommandFailure(.problemsFound, "\(path) is not an album")
            }
        }
        return (path, "Albums/" + album.joined(separator: "/"))
    }
}

extension String {
    /// One decimal: `12.3`.
    init(format1 value: Double) {
        let tenths = Int((value * 10).rounded())
        self = "\(tenths / 10).\(tenths % 10)"
    }
}

/// syncfs(2), which the Glibc module does not export.
@_silgen_name("syncfs")
private func systemSyncfs(_ fd: Int32) -> Int32
