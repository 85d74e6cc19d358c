import AlbumCore
import Glibc

/// `albumfs unmount MOUNTPOINT`: `fusermount3 -u MOUNTPOINT`, then waits until
/// the daemon has let go of its store (its lock is free), so that an `fsck`
/// or a new mount right after never finds the store in use.
struct UnmountCommand {
    let mountPoint: String
    /// How long the daemon may take to exit after the unmount.
    static let releaseTimeoutMilliseconds = 10_000

    init(parsing arguments: [String]) throws(CommandFailure) {
        guard arguments.count == 1 else { throw .usage("expected one MOUNTPOINT") }
        mountPoint = arguments[0]
    }

    func run() throws(CommandFailure) -> Int32 {
        let store = Self.store(mountedOn: StoreLocation(path: mountPoint).root)
        let words: [String] = ["fusermount3", "-u", mountPoint]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let rc = posix_spawnp(&pid, "fusermount3", nil, nil, argv, environ)
        guard rc == 0 else { throw CommandFailure(.mountFailed, "cannot run fusermount3: \(String(cString: strerror(rc)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard (status & 0x7f) == 0 && (status >> 8) & 0xff == 0 else { return ExitCode.mountFailed.rawValue }
        if let store, !Self.waitForRelease(of: store) {
            throw CommandFailure(.problemsFound,
                                 "unmounted \(mountPoint), but the daemon still holds the store \(store.root) after \(Self.releaseTimeoutMilliseconds / 1000) s")
        }
        if let store { sayWhatWaits(store) }
        return ExitCode.success.rawValue
    }

    /// Uploads still queued are kept, not lost: they go at the next mount
    /// (SEMANTICS.md § Remote storage). Said on standard error, exit 0.
    private func sayWhatWaits(_ store: StoreLocation) {
        guard let statistics = try? StoreStatistics.read(store), statistics.uploadsPending > 0 else { return }
        let count = statistics.uploadsPending
        toStandardError("albumfs: unmounted \(mountPoint) with \(count) upload\(count == 1 ? "" : "s") to the bucket waiting "
                        + "(\(statistics.uploadBytesPending) bytes): kept in the store, they resume at its next mount "
                        + "(albumfs sync --wait before unmounting waits for them)\n")
    }

    /// The store of the albumfs mount on `path` (its fsname in the mount table), if any.
    static func store(mountedOn path: String) -> StoreLocation? {
        let fd = open("/proc/self/mounts", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var table: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while case let n = read(fd, &chunk, chunk.count), n > 0 { table += chunk[..<n] }
        for line in table.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: " ")).map(unescape)
            if fields.count >= 3 && fields[1] == path && fields[2] == "fuse.albumfs" {
                return StoreLocation(path: fields[0])
            }
        }
        return nil
    }

    /// The mount table writes space, tab, newline and backslash as `\ooo`.
    private static func unescape(_ field: ArraySlice<UInt8>) -> String {
        var bytes: [UInt8] = []
        var index = field.startIndex
        while index < field.endIndex {
            if field[index] == UInt8(ascii: "\\"), index + 3 < field.endIndex,
               let value = UInt8(String(decoding: field[(index + 1)...(index + 3)], as: UTF8.self), radix: 8) {
                bytes.append(value)
                index += 4
            } else {
                bytes.append(field[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Waits until no process holds the store's lock (the daemon has exited).
    static func waitForRelease(of store: StoreLocation) -> Bool {
        let fd = open(store.lockPath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return true }   // no lock file: nothing holds it
        defer { close(fd) }
        var waited = 0
        while flock(fd, LOCK_SH | LOCK_NB) != 0 {
            guard waited < releaseTimeoutMilliseconds else { return false }
            usleep(5_000)
            waited += 5
        }
        flock(fd, LOCK_UN)
        return true
    }
}
