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
        var start = timespec()
        clock_gettime(CLOCK_MONOTONIC, &start)
        while true {
            guard let pending = Self.pending(root) else {
                throw CommandFailure(.usage, "\(root) is not a mounted albumfs library (no user.albumfs.indexing)")
            }
            if pending == 0 { return ExitCode.success.rawValue }
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            if Double(now.tv_sec - start.tv_sec) >= timeout {
                print("\(pending) file\(pending == 1 ? "" : "s") still waiting to be read after \(Int(timeout)) s")
                return ExitCode.problemsFound.rawValue
            }
            usleep(50_000)
        }
    }

    private static func pending(_ root: String) -> Int? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = systemGetxattr(root, "user.albumfs.indexing", &buffer, buffer.count)
        guard count > 0 else { return nil }
        return Int(String(decoding: buffer.prefix(count), as: UTF8.self))
    }
}

/// getxattr(2), from <sys/xattr.h>, which the Glibc module does not export.
@_silgen_name("getxattr")
private func systemGetxattr(_ path: UnsafePointer<CChar>, _ name: UnsafePointer<CChar>, _ value: UnsafeMutableRawPointer?,
                            _ size: Int) -> Int
