import AlbumCore
import AlbumFUSE
import Glibc

/// `albumfs fsck [--store DIR] [--repair] [--verify] [--remote]`: exit 0 when
/// consistent, 1 when problems were found (and, with --repair, fixed where
/// no data is lost), 2 when the check could not run. `--verify` also
/// re-reads every content file against its recorded SHA-256 (bit rot),
/// changing nothing; without it fsck reads no file data (O(m+n)).
/// `--remote` also checks the bucket (RemoteChecker): a HEAD per object,
/// one listing; its keys as the mount finds them.
struct FsckCommand {
    var store: String?
    var repair = false
    var verify = false
    var remote = false

    init(parsing arguments: [String]) throws(CommandFailure) {
        var reader = ArgumentReader(arguments)
        while let argument = reader.next() {
            switch argument {
            case "--repair": repair = true
            case "--verify": verify = true
            case "--remote": remote = true
            case _ where argument.hasPrefix("--store"): store = try reader.value(of: "--store", in: argument)
            default: throw .usage("unknown fsck argument \(argument)")
            }
        }
    }

    func run() throws(CommandFailure) -> Int32 {
        let location = try storeLocation(store)
        let problems: [StoreChecker.Problem]
        do {
            problems = try StoreChecker(location: location).check(repair: repair)
        } catch {
            throw CommandFailure(.usage, describe(error))
        }
        for problem in problems { print(Self.line(problem, repair)) }
        let mismatches = verify ? try verifyContent(location) : []
        for mismatch in mismatches { print(mismatch.description) }
        let remoteReport = remote ? try checkRemote(location) : nil
        for problem in remoteReport?.problems ?? [] { print(Self.line(problem, repair)) }
        for note in remoteReport?.notes ?? [] { print(note) }
        let count = problems.count + mismatches.count + (remoteReport?.problems.count ?? 0)
        if count == 0 {
            var also: [String] = []
            if verify { also.append("every content file matches its SHA-256") }
            if let remoteReport { also.append("the bucket holds all \(remoteReport.checked) object\(remoteReport.checked == 1 ? "" : "s") as recorded") }
            print("\(location.root): consistent" + also.map { ", " + $0 }.joined())
            return ExitCode.success.rawValue
        }
        print("\(location.root): \(count) problem\(count == 1 ? "" : "s") found")
        return ExitCode.problemsFound.rawValue
    }

    private static func line(_ problem: StoreChecker.Problem, _ repair: Bool) -> String {
        let action = problem.repair.map { (repair ? "repaired: " : "would ") + $0 }
            ?? "not repaired: \(problem.whyNotRepaired ?? "it cannot be repaired without losing data")"
        return "\(problem.description) — \(action)"
    }

    /// The bucket against the library, with a progress line on a terminal.
    private func checkRemote(_ location: StoreLocation) throws(CommandFailure) -> RemoteChecker.Report {
        let checker = RemoteChecker(location: location)
        let configuration: RemoteConfiguration?
        do { configuration = try checker.remote() } catch { throw CommandFailure(.usage, describe(error)) }
        guard let configuration else { throw CommandFailure(.usage, "the store \(location.root) has no remote (albumfs init --remote)") }
        let backend = try RemoteConnection.backend(for: configuration)
        let onTerminal = isatty(STDERR_FILENO) == 1
        do throws(LibraryError) {
            return try checker.check(backend, repair: repair) { done, total in
                guard onTerminal else { return }
                toStandardError("\rchecking the bucket: \(done)/\(total) objects")
                if done == total { toStandardError("\n") }
            }
        } catch {
            throw CommandFailure(.usage, describe(error))
        }
    }

    /// Every content file against its SHA-256, with a progress line on a terminal.
    private func verifyContent(_ location: StoreLocation) throws(CommandFailure) -> [ContentVerifier.Mismatch] {
        let onTerminal = isatty(STDERR_FILENO) == 1
        do throws(LibraryError) {
            let mismatches = try ContentVerifier(location: location, reader: MediaFactsReader()).verify { done, total, bytes in
                guard onTerminal else { return }
                toStandardError("\rverifying: \(done)/\(total) files, \(bytes / 1_048_576) MiB")
                if done == total { toStandardError("\n") }
            }
            if !onTerminal { toStandardError("verified every recorded SHA-256: \(mismatches.count) mismatch\(mismatches.count == 1 ? "" : "es")\n") }
            return mismatches
        } catch {
            throw CommandFailure(.usage, describe(error))
        }
    }
}

/// Writes `text` to standard error as it is (progress lines).
func toStandardError(_ text: String) {
    var bytes = Array(text.utf8)
    _ = bytes.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
}
