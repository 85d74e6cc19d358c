import AlbumCore
import Glibc

/// `albumfs recover --remote s3://BUCKET/PREFIX --endpoint URL [--region R]
/// [--profile P] [--at TIME] NEWSTORE`: a library rebuilt from its bucket
/// alone (SEMANTICS.md § Surviving the machine): the latest snapshot (at or
/// before TIME: `YYYY-MM-DDTHH:MM:SSZ` or a prefix of it, such as a date),
/// then what was uploaded after it. NEWSTORE must hold no store; the result
/// mounts at once, every original remote-only. A progress line on a
/// terminal, a summary at the end.
struct RecoverCommand {
    var store: String?
    var remote: RemoteConfiguration
    var at: String?

    init(parsing arguments: [String]) throws(CommandFailure) {
        var reader = ArgumentReader(arguments)
        var options = RemoteArguments()
        while let argument = reader.next() {
            if try options.take(argument, from: &reader) { continue }
            if argument.hasPrefix("--at") {
                let text = try reader.value(of: "--at", in: argument)
                // A snapshot's name is YYYYMMDDTHHMMSSmmmZ: compared as a prefix, without the zone letter.
                var stamp = String(text.filter { $0 != "-" && $0 != ":" && $0 != "." })
                if stamp.hasSuffix("Z") { stamp.removeLast() }
                guard !stamp.isEmpty, stamp.count <= 18, stamp.allSatisfy({ $0.isNumber || $0 == "T" }) else {
                    throw .usage("--at takes a UTC time, YYYY-MM-DDTHH:MM:SSZ or a prefix of it (a date), not \(text)")
                }
                at = stamp
                continue
            }
            guard !argument.hasPrefix("-"), store == nil else { throw .usage("unknown recover argument \(argument)") }
            store = argument
        }
        guard let remote = try options.configuration(), store != nil else {
            throw .usage("usage: albumfs recover --remote s3://BUCKET/PREFIX --endpoint URL [--at TIME] NEWSTORE")
        }
        self.remote = remote
    }

    func run() throws(CommandFailure) -> Int32 {
        let location = StoreLocation(path: store ?? ".")
        let backend = try RemoteConnection.backend(for: remote)
        let onTerminal = isatty(STDERR_FILENO) == 1
        umask(0o077)
        do {
            let (library, report) = try Library.recover(
                from: backend, remote: remote, at: at, into: location, owner: Caller(uid: getuid(), gid: getgid()),
                options: { var options = LibraryOptions(); options.log = { toStandardError("albumfs: \($0)\n") }; return options }(),
                progress: { line in if onTerminal { toStandardError("\r\(line)\u{1b}[K") } })
            withExtendedLifetime(library) {}
            if onTerminal { toStandardError("\n") }
            if let snapshot = report.snapshot {
                print("recovered \(location.root) from \(snapshot): \(report.assets) assets, \(report.fromCompanions) of them uploaded after it")
            } else {
                print("recovered \(location.root) with no snapshot (none usable in \(remote.url)): \(report.assets) assets from their uploads")
            }
            if !report.skipped.isEmpty { print("skipped unusable snapshots: \(report.skipped.joined(separator: ", "))") }
            if report.lost > 0 { print("\(report.lost) assets of the snapshot never reached the bucket: left out") }
            return ExitCode.success.rawValue
        } catch let error as LibraryError {
            throw CommandFailure(.unusableStore, describe(error) + leftBehind(location))
        } catch {
            throw CommandFailure(.unusableStore, "recover from \(remote.url): \(error)" + leftBehind(location))
        }
    }

    /// What a failed recovery left, to be removed before the next try (the
    /// bucket is never changed by a recovery).
    private func leftBehind(_ location: StoreLocation) -> String {
        location.holdsStore ? " (the unfinished store in \(location.root) is left as it is: remove it before trying again)" : ""
    }
}
