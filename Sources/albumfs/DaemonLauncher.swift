import Glibc

/// Starts the daemon as a new session with posix_spawn (no fork of a running
/// Swift process) and waits for its one-line report on a pipe: `OK`, or
/// `E<status> <message>`.
struct DaemonLauncher {
    /// The descriptor number the daemon reports on.
    static let readyDescriptor: Int32 = 3
    /// How long start-up may take before the launcher gives up.
    static let startTimeoutMilliseconds: Int32 = 30_000
    let arguments: [String]

    func launch() throws(CommandFailure) -> Int32 {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw CommandFailure(.mountFailed, "pipe: \(String(cString: strerror(errno)))") }
        let (readEnd, writeEnd) = (pipeEnds[0], pipeEnds[1])
        // Only the dup2'd copy may reach the daemon.
        for fd in pipeEnds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        defer { close(readEnd) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, writeEnd, Self.readyDescriptor)
        // The daemon reports on the pipe; it has no use for the terminal.
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        // POSIX_SPAWN_SETSID (0x80) is a _GNU_SOURCE macro the Glibc module lacks.
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK) | 0x80)

        let executable = Self.ownExecutable()
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        close(writeEnd)
        guard rc == 0 else { throw CommandFailure(.mountFailed, "cannot start the daemon: \(String(cString: strerror(rc)))") }

        let report = readReport(readEnd)
        if report == "OK" { return ExitCode.success.rawValue }
        var status: Int32 = 0
        waitpid(pid, &status, WNOHANG)
        if report.hasPrefix("E"), let space = report.firstIndex(of: " "),
           let code = Int32(report[report.index(after: report.startIndex)..<space]) {
            throw CommandFailure(ExitCode(rawValue: code) ?? .mountFailed, String(report[report.index(after: space)...]))
        }
        if report.isEmpty { throw CommandFailure(.mountFailed, "the daemon exited during start-up") }
        throw CommandFailure(.mountFailed, "the daemon did not start: \(report)")
    }

    private func readReport(_ fd: Int32) -> String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while poll(&poller, 1, Self.startTimeoutMilliseconds) > 0 {
            let n = read(fd, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes += chunk[..<n]
        }
        return String(decoding: bytes, as: UTF8.self).trimmingNewlines()
    }

    static func ownExecutable() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        return n > 0 ? String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
    }

    // MARK: the daemon's side

    static func reportReady(on fd: Int32) {
        send("OK\n", on: fd)
        close(fd)
    }

    static func reportFailure(_ failure: CommandFailure, on fd: Int32) {
        send("E\(failure.code.rawValue) \(failure.message)\n", on: fd)
        close(fd)
    }

    /// A daemon keeps no terminal: stdio to /dev/null, and no hold on any directory.
    static func detachStandardStreams() {
        let null = open("/dev/null", O_RDWR)
        if null >= 0 {
            for fd: Int32 in [0, 1, 2] { dup2(null, fd) }
            if null > 2 { close(null) }
        }
        chdir("/")
    }

    private static func send(_ message: String, on fd: Int32) {
        var message = message
        message.withUTF8 { bytes in _ = write(fd, bytes.baseAddress, bytes.count) }
    }
}

extension String {
    func trimmingNewlines() -> String {
        var result = self
        while result.last == "\n" { result.removeLast() }
        return result
    }
}
