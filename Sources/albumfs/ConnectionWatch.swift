import AlbumFUSE
import Glibc

/// Ends the FUSE connection of a daemon that was killed but cannot die.
///
/// A daemon killed with SIGKILL (the OOM killer, `kill -9`) can be left with
/// one thread it cannot end: the one telling the kernel that a name went
/// stale (`notify_inval_entry`), blocked on a directory lock that a request
/// holds while it waits for a reply the dead daemon will never send. That
/// thread keeps /dev/fuse open, so the kernel never ends the connection, and
/// every process that touches the mount hangs (docs/DESIGN.md, "A killed
/// daemon"). This watcher, a small process of its own started at
/// mount, sees that state (the daemon's main thread gone, /dev/fuse still
/// open in one of its threads, twice in a row) and aborts the connection
/// through fusectl (`/sys/fs/fuse/connections/N/abort`, writable by the
/// mount's owner), as `umount -f` would: the blocked requests fail, the
/// stuck thread returns, the daemon ends, and the mount reports "Transport
/// endpoint is not connected" until it is unmounted, like any crashed
/// FUSE file system. It is the daemon's child and exits when the daemon does.
enum ConnectionWatch {
    /// How often the daemon's state is looked at.
    static let intervalMilliseconds: Int32 = 500

    /// Starts the watcher of this process's mount at `mountPoint` (already
    /// mounted); it logs where the daemon does. Best effort: without it the
    /// mount works as before.
    static func start(mountPoint: String, systemLog: Bool) {
        guard let connection = connectionNumber(of: mountPoint) else {
            Log.error("no FUSE connection found for \(mountPoint) in /proc/self/mountinfo: a killed daemon may leave the mount hung")
            return
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // No terminal input or output (standard error stays, for its log).
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        let executable = DaemonLauncher.ownExecutable()
        let arguments = [executable, "watch-connection", String(getpid()), String(connection)] + (systemLog ? ["--syslog"] : [])
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        if rc != 0 {
            Log.error("cannot start the connection watcher: \(String(cString: strerror(rc))); a killed daemon may leave the mount hung")
        }
    }

    /// The watcher: `albumfs watch-connection PID CONNECTION [--syslog]`. Returns when
    /// the daemon has exited, after aborting its connection if it had to.
    static func run(_ arguments: [String]) throws(CommandFailure) -> Int32 {
        guard (2...3).contains(arguments.count), arguments.count == 2 || arguments[2] == "--syslog",
              let daemon = pid_t(arguments[0]), let connection = UInt32(arguments[1]) else {
            throw .usage("expected PID CONNECTION [--syslog]")
        }
        // Nothing of the daemon's is kept (its descriptors are close-on-exec;
        // this is for any that is not): above all not /dev/fuse, whose last
        // holder keeps the connection alive. (Its working directory is the
        // daemon's, `/`.)
        for fd in directoryNames("/proc/self/fd").compactMap({ Int32($0) }) where fd > 2 { close(fd) }
        if arguments.count == 3 { Log.useSystemLog() }
        var stuckBefore = false
        // The daemon is the parent until its last thread has exited (a
        // thread left of it still counts): then this process is handed on.
        while getppid() == daemon {
            poll(nil, 0, intervalMilliseconds)
            let stuck = isKilledButHoldingDevice(daemon)
            if stuck && stuckBefore {
                abort(connection)
                return ExitCode.success.rawValue
            }
            stuckBefore = stuck
        }
        return ExitCode.success.rawValue
    }

    /// The daemon's main thread has exited (a zombie) while one of its
    /// threads still holds /dev/fuse open. A daemon that ends normally closes
    /// /dev/fuse before its main thread returns, so this is only ever the
    /// killed daemon of the comment above.
    static func isKilledButHoldingDevice(_ daemon: pid_t) -> Bool {
        guard let stat = readText("/proc/\(daemon)/stat"), let close = stat.lastIndex(of: ")") else { return false }
        let state = stat[stat.index(after: close)...].dropFirst().first
        guard state == "Z" || state == "X" else { return false }
        for task in directoryNames("/proc/\(daemon)/task") {
            for fd in directoryNames("/proc/\(daemon)/task/\(task)/fd")
            where readLink("/proc/\(daemon)/task/\(task)/fd/\(fd)") == "/dev/fuse" {
                return true
            }
        }
        return false
    }

    private static func abort(_ connection: UInt32) {
        let path = "/sys/fs/fuse/connections/\(connection)/abort"
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else {
            Log.error("the daemon was killed and cannot exit, and \(path) cannot be opened (\(String(cString: strerror(errno)))): abort its connection as root")
            return
        }
        defer { Glibc.close(fd) }
        if write(fd, "1", 1) == 1 {
            Log.error("the daemon was killed and one of its threads could not exit: its FUSE connection \(connection) is aborted (unmount it with fusermount3 -u)")
        }
    }

    /// The fusectl number of the FUSE mount at `mountPoint` (its device's
    /// minor number; the last mount there is the one just made).
    static func connectionNumber(of mountPoint: String) -> UInt32? {
        guard let table = readText("/proc/self/mountinfo") else { return nil }
        var found: UInt32?
        for line in table.split(separator: "\n") {
            // ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS ... - FSTYPE SOURCE ...
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count > 4, unescapeMountInfo(fields[4]) == mountPoint,
                  let separator = fields.firstIndex(of: "-"), separator + 1 < fields.count,
                  fields[separator + 1].hasPrefix("fuse") else { continue }
            let device = fields[2].split(separator: ":")
            if device.count == 2, device[0] == "0", let minor = UInt32(device[1]) { found = minor }
        }
        return found
    }

    /// mountinfo writes space, tab, newline and backslash as octal escapes.
    static func unescapeMountInfo(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(field.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "\\"), utf8.count >= 3,
               let value = UInt8(String(decoding: utf8.prefix(3), as: UTF8.self), radix: 8) {
                bytes.append(value)
                utf8 = utf8.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func readText(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { break }
            bytes += chunk[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func directoryNames(_ path: String) -> [String] {
        guard let directory = opendir(path) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    private static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
