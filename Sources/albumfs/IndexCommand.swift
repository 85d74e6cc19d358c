import AlbumCore
import Glibc

/// `albumfs index --wait [--timeout SECONDS] MOUNTPOINT`: returns once the
/// mounted library has read the facts of every file closed so far (the
/// root's `user.albumfs.indexing` is 0), or exits 1 after the timeout
/// (default 600 s) saying how many are still waiting.
struct IndexCommand {
    var mountPoint: String?
    var wait = false
    var timeout = 600.0

    init(parsing arguments: [String]) throws(CommandFailure) {
        var reader = ArgumentReader(arguments)
        while let argument = reader.next() {
            switch argument {
            case "--wait": wait = true
            case _ where argument.hasPrefix("--timeout"):
                let text = try reader.value(of: "--timeout", in: argument)
                guard let seconds = Double(text), seconds >= 0 else { throw .usage("--timeout takes seconds, not \(text)") }
                timeout = seconds
            case _ where argument.hasPrefix("-"): throw .usage("unknown index argument \(argument)")
            default:
                guard mountPoint == nil else { throw .usage("expected one MOUNTPOINT") }
                mountPoint = argument
            }
        }
        guard wait, mountPoint != nil else { throw .usage("usage: albumfs index --wait [--timeout SECONDS] MOUNTPOINT") }
    }

    func run() throws(CommandFailure) -> Int32 {
        let root = StoreLocation(path: mountPoint ?? ".").root
        switch IndexingWait.wait(for: BytePath(root), timeout: timeout) {
        case .done:
            return ExitCode.success.rawValue
        case .notALibrary:
            throw CommandFailure(.usage, "\(root) is not a mounted albumfs library (no user.albumfs.indexing)")
        case .timedOut(let pending):
            print("\(pending) file\(pending == 1 ? "" : "s") still waiting to be read after \(Int(timeout)) s")
            return ExitCode.problemsFound.rawValue
        case .interrupted:   // (only where Interruption holds signals back: not here)
            return 128 + (Interruption.received ?? SIGINT)
        }
    }
}
