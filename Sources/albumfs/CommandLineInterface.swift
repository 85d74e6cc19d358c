import AlbumCore
import AlbumFUSE
import Glibc

/// Picks the subcommand and runs it; the only place that prints a failure.
/// Each command is one row of `commands`: its name, its usage line (the
/// `--help` text is made from them) and how it runs.
enum CommandLineInterface {
    static let version = "0.1.0"

    struct Command: Sendable {
        let name: String
        var aliases: [String] = []
        /// Its line in the usage text; nil: not for users (the daemon's helpers).
        let usage: String?
        let run: @Sendable ([String]) throws(CommandFailure) -> Int32
    }

    static let commands: [Command] = [
        Command(name: "mount", usage: "mount [--store DIR] [--create] [-f] [-d] [-s] [-o OPT[,OPT…]] MOUNTPOINT") { a throws(CommandFailure) in
            try MountCommand(parsing: a, storeAsArgument: false).run()
        },
        Command(name: "init", usage: "init [--remote s3://BUCKET/PREFIX --endpoint URL [--region R] [--profile P]] [DIR]") { a throws(CommandFailure) in try InitCommand(parsing: a).run() },
        Command(name: "remote", usage: "remote attach s3://BUCKET/PREFIX --endpoint URL [--region R] [--profile P] [--store DIR] [--no-upload]") { a throws(CommandFailure) in
            try RemoteAttachCommand(parsing: a).run()
        },
        Command(name: "recover", usage: "recover --remote s3://BUCKET/PREFIX --endpoint URL [--region R] [--profile P] [--at TIME] NEWSTORE") { a throws(CommandFailure) in
            try RecoverCommand(parsing: a).run()
        },
        Command(name: "fsck", usage: "fsck [--store DIR] [--repair] [--verify] [--remote]") { a throws(CommandFailure) in try FsckCommand(parsing: a).run() },
        Command(name: "dedupe", usage: "dedupe [--dry-run] [--store DIR | MOUNTPOINT]") { a throws(CommandFailure) in try DedupeCommand(parsing: a).run() },
        Command(name: "index", usage: "index --wait [--timeout SECONDS] MOUNTPOINT") { a throws(CommandFailure) in
            try WaitCommand(.index, parsing: a).run()
        },
        Command(name: "sync", usage: "sync --wait [--timeout SECONDS] MOUNTPOINT") { a throws(CommandFailure) in
            try WaitCommand(.sync, parsing: a).run()
        },
        Command(name: "refresh", usage: "refresh MOUNTPOINT") { a throws(CommandFailure) in try RefreshCommand(parsing: a).run() },
        Command(name: "stats", usage: "stats [--json] [--store DIR | MOUNTPOINT]") { a throws(CommandFailure) in try StatsCommand(parsing: a).run() },
        Command(name: "import", usage: "import [--album PATH] [--mount MNT | --store DIR] SOURCE…") { a throws(CommandFailure) in
            try ImportCommand(parsing: a).run()
        },
        Command(name: "unmount", aliases: ["umount"], usage: "unmount MOUNTPOINT") { a throws(CommandFailure) in try UnmountCommand(parsing: a).run() },
        // Not for users: stores for the benchmark and scale tests (MakeStoreCommand),
        // the daemon's facts worker (IsolatedFactsReader) and its watcher (ConnectionWatch).
        Command(name: "manpage", usage: nil) { a throws(CommandFailure) in try ManPage.print(template: a) },
        Command(name: "make-store", usage: nil) { a throws(CommandFailure) in try MakeStoreCommand(parsing: a).run() },
        Command(name: "read-facts", usage: nil) { _ throws(CommandFailure) in FactsWorker.serve() },
        Command(name: "watch-connection", usage: nil) { a throws(CommandFailure) in try ConnectionWatch.run(a) },
    ]

    /// The synopsis, a line a form: the usage text's and the man page's
    /// (`albumfs manpage`, which scripts/install runs on dist/albumfs.1.in).
    static var synopsis: [String] {
        var lines = commands.compactMap(\.usage) + ["--help | --version"]
        lines.insert("STORE MOUNTPOINT [-o OPT[,OPT…]]     (the form mount.fuse3 uses)", at: 1)
        return lines
    }

    static var usage: String {
        let text = synopsis.enumerated().map { ($0 == 0 ? "usage: albumfs " : "       albumfs ") + $1 }.joined(separator: "\n")
        return text + "\n\n" + description
    }

    /// The rest of the reference (options, what each command does, exit
    /// statuses) is the man page's alone (dist/albumfs.1.in), not a second copy here.
    private static let description = """
        The store defaults to ${XDG_DATA_HOME:-$HOME/.local/share}/albumfs; any other
        store is made with albumfs init DIR. Mount options, what each command does,
        exit statuses and files: man albumfs (docs/GUIDE.md in the source).
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
            case let word?:
                if let command = commands.first(where: { $0.name == word || $0.aliases.contains(word) }) {
                    return try command.run(Array(arguments.dropFirst()))
                }
                guard isStorePath(word) else { throw unknownCommand(word) }
                return try MountCommand(parsing: arguments, storeAsArgument: true).run()
            }
        } catch {
            Log.error(error.message)
            return error.code.rawValue
        }
    }

    /// Whether the first word is the STORE of `albumfs STORE MOUNTPOINT`
    /// (mount.fuse3 passes a path; a word that is neither a command nor
    /// anything on disk is a typo of a command).
    private static func isStorePath(_ word: String) -> Bool {
        if word.contains("/") || word.hasPrefix("-") { return true }
        var info = stat()
        return lstat(word, &info) == 0
    }

    private static func unknownCommand(_ word: String) -> CommandFailure {
        let names = commands.filter { $0.usage != nil }.map(\.name)
        let (distance, closest) = names.map { (editDistance(word, $0), $0) }.min { $0.0 < $1.0 }!
        let hint = distance <= max(2, closest.count / 3) ? "; did you mean '\(closest)'?" : ""
        return .usage("unknown command '\(word)'\(hint)")
    }

    /// Levenshtein distance of two words.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var row = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                (previous, row[j]) = (row[j], min(row[j] + 1, row[j - 1] + 1, previous + cost))
            }
        }
        return a.isEmpty ? b.count : row[b.count]
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
