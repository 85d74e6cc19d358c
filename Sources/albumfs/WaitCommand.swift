import AlbumCore
import Glibc

/// `albumfs index --wait [--timeout SECONDS] MOUNTPOINT` and `albumfs sync
/// --wait [--timeout SECONDS] MOUNTPOINT`: return once the mounted library
/// has done the background work of every file closed so far (read its facts;
/// uploaded it to the remote), as the root's count says (IndexingWait), or
/// exit 1 after the timeout (default 600 s) saying how many are waiting.
struct WaitCommand {
    enum Work: String {
        case index, sync
        var attribute: String { self == .index ? "user.albumfs.indexing" : "user.albumfs.uploading" }
        var what: String { self == .index ? "read" : "uploaded" }
    }

    let work: Work
    var mountPoint: String?
    var wait = false
    var timeout = 600.0

    init(_ work: Work, parsing arguments: [String]) throws(CommandFailure) {
        self.work = work
        var reader = ArgumentReader(arguments)
        while let argument = reader.next() {
            switch argument {
            case "--wait": wait = true
            case _ where argument.hasPrefix("--timeout"):
                let text = try reader.value(of: "--timeout", in: argument)
                guard let seconds = Double(text), seconds >= 0 else { throw .usage("--timeout takes seconds, not \(text)") }
                timeout = seconds
            case _ where argument.hasPrefix("-"): throw .usage("unknown \(work.rawValue) argument \(argument)")
            default:
                guard mountPoint == nil else { throw .usage("expected one MOUNTPOINT") }
                mountPoint = argument
            }
        }
        guard wait, mountPoint != nil else { throw .usage("usage: albumfs \(work.rawValue) --wait [--timeout SECONDS] MOUNTPOINT") }
    }

    func run() throws(CommandFailure) -> Int32 {
        let root = StoreLocation(path: mountPoint ?? ".").root
        let started = monotonicSeconds()
        switch IndexingWait.wait(for: BytePath(root), counting: work.attribute, timeout: timeout) {
        case .done:
            // Then the metadata's snapshot (SEMANTICS.md § Surviving the machine);
            // a mount that takes none (read-only) has no such count.
            guard work == .sync else { return ExitCode.success.rawValue }
            let left = max(0, timeout - (monotonicSeconds() - started))
            if case .timedOut = IndexingWait.wait(for: BytePath(root), counting: "user.albumfs.snapshotting", timeout: left) {
                print("the library's metadata is still waiting for its snapshot after \(Int(timeout)) s")
                return ExitCode.problemsFound.rawValue
            }
            return ExitCode.success.rawValue
        case .notALibrary:
            let why = work == .sync ? "a mounted albumfs library with a remote" : "a mounted albumfs library"
            throw CommandFailure(.usage, "\(root) is not \(why) (no \(work.attribute))")
        case .timedOut(let pending):
            print("\(pending) file\(pending == 1 ? "" : "s") still waiting to be \(work.what) after \(Int(timeout)) s")
            return ExitCode.problemsFound.rawValue
        case .interrupted:   // (only where Interruption holds signals back: not here)
            return 128 + (Interruption.received ?? SIGINT)
        }
    }
}
