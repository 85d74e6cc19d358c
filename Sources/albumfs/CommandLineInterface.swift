import AlbumCore
import AlbumFUSE
import Glibc

/// Picks the subcommand and runs it; the only place that prints a failure.
enum CommandLineInterface {
    static let version = "0.1.0"

    static let usage = """
        usage: albumfs mount [--store DIR] [--create] [-f] [-d] [-s] [-o OPT[,OPT…]] MOUNTPOINT
               albumfs STORE MOUNTPOINT [-o OPT[,OPT…]]     (the form mount.fuse3 uses)
               albumfs init [DIR]
               albumfs fsck [--store DIR] [--repair] [--verify]
               albumfs dedupe [--dry-run] [--store DIR | MOUNTPOINT]
               albumfs index --wait [--timeout SECONDS] MOUNTPOINT
               albumfs stats [--json] [--store DIR | MOUNTPOINT]
               albumfs import [--album PATH] [--mount MNT | --store DIR] SOURCE…
               albumfs unmount MOUNTPOINT
               albumfs --help | --version

        The store defaults to ${XDG_DATA_HOME:-$HOME/.local/share}/albumfs and is
        created on first use; any other store must exist: make it with
        albumfs init DIR (or mount --create). Options: ro, allow_other, nopassthrough (file
        data through the daemon, not FUSE passthrough), and the generic mount
        options (rw, nosuid, noatime, …); unknown options are refused.
        import copies the photos and videos under each SOURCE into Camera Roll/
        (or Albums/PATH/), keeping modification times and skipping what the
        library already has (by SHA-256); a mounted library is used through its
        mount, an unmounted one is mounted privately for the import.
        Exit status: 0 ok, 1 fsck found problems (import: some files failed),
        2 usage, 3 unusable store, 4 mount point missing or mount failed,
        130 import interrupted by Ctrl-C (run it again to finish).
        """

    static func run(_ arguments: [String]) -> Int32 {
        do throws(CommandFailure) {
            switch arguments.first {
            case nil, "--help", "-h", "help":
                print(usage)
                return arguments.isEmpty ? ExitCode.usage.rawValue : ExitCode.success.rawValue
            case "--version", "-V", "version":
                print("albumfs \(version)")
                return ExitCode.success.rawValue
            case "mount":
                return try MountCommand(parsing: Array(arguments.dropFirst()), storeAsArgument: false).run()
            case "init":
                return try InitCommand(parsing: Array(arguments.dropFirst())).run()
            case "fsck":
                return try FsckCommand(parsing: Array(arguments.dropFirst())).run()
            case "read-facts":   // the daemon's facts worker (IsolatedFactsReader), not for users
                return FactsWorker.serve()
            case "watch-connection":   // the daemon's watcher (ConnectionWatch), not for users
                return try ConnectionWatch.run(Array(arguments.dropFirst()))
            case "index":
                return try IndexCommand(parsing: Array(arguments.dropFirst())).run()
            case "dedupe":
                return try DedupeCommand(parsing: Array(arguments.dropFirst())).run()
            case "import":
                return try ImportCommand(parsing: Array(arguments.dropFirst())).run()
            case "stats":
                return try StatsCommand(parsing: Array(arguments.dropFirst())).run()
            case "unmount", "umount":
                return try UnmountCommand(parsing: Array(arguments.dropFirst())).run()
            default:
                return try MountCommand(parsing: arguments, storeAsArgument: true).run()
            }
        } catch {
            Log.error(error.message)
            return error.code.rawValue
        }
    }
}

extension CommandFailure {
    static func usage(_ message: String) -> CommandFailure {
        CommandFailure(.usage, message + " (see albumfs --help)")
    }
}

/// The environment as a dictionary, read once.
func environment() -> [String: String] {
    var result: [String: String] = [:]
    var pointer = environ
    while let entry = pointer.pointee {
        let pair = String(cString: entry)
        if let equals = pair.firstIndex(of: "=") {
            result[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
        }
        pointer += 1
    }
    return result
}

func storeLocation(_ explicit: String?) throws(CommandFailure) -> StoreLocation {
    if let explicit { return StoreLocation(path: explicit) }
    guard let path = StoreLocation.defaultPath(environment: environment()) else {
        throw CommandFailure(.usage, "no store given and neither XDG_DATA_HOME nor HOME is set: use --store DIR")
    }
    return StoreLocation(path: path)
}
