import AlbumCore
import AlbumFUSE
import AlbumMedia
import Glibc
import Synchronization

/// The daemon's facts reader: AlbumMedia's readers run in a worker process
/// (`albumfs read-facts`, FactsWorker), started on first use and again after
/// it died, under SCHED_IDLE. A file on which the worker crashes or takes too long (10 s, plus
/// 1 s per 32 MiB to hash) gets only its SHA-256, computed here (libcrypto
/// alone), and a log line: a hostile file costs a worker, never the mount.
final class IsolatedFactsReader: AssetFactsReader, Sendable {
    private struct Worker {
        let pid: pid_t
        /// The daemon's end of a socket pair; the worker has the other as stdin and stdout.
        let socket: Int32
        var lines: LineReader
    }

    private let worker = Mutex<Worker?>(nil)

    deinit {
        worker.withLock { if let w = $0 { Self.stop(w) } }
    }

    func facts(ofFileAt descriptor: Int32) throws -> AssetFacts {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw LibraryError.io(errno) }
        let timeout = Int32(clamping: 10_000 + Int64(info.st_size) / (32 << 20) * 1000)
        // The worker opens the very file through this process's descriptor.
        let path = "/proc/\(getpid())/fd/\(descriptor)"
        let answer = worker.withLock { worker -> String? in
            if worker == nil { worker = Self.start() }
            guard var w = worker else { return nil }
            guard FactsWorker.writeAll(w.socket, path + "\n"), let line = w.lines.next(timeout: timeout) else {
                Self.stop(w)
                worker = nil
                return nil
            }
            worker = w  // its line buffer moved on
            return line
        }
        if let answer {
            if answer.hasPrefix("!") { throw LibraryError.io(Int32(answer.dropFirst()) ?? EIO) }
            if let facts = AssetFacts(line: answer) { return facts }
        }
        Log.error("reading the facts of \(path) failed (the reader crashed, hung or answered nonsense): keeping only its SHA-256")
        return AssetFacts(sha256: try sha256(ofFileAt: descriptor))
    }

    func sha256(ofFileAt descriptor: Int32) throws -> String {
        try MediaReader.hashOnly(fileDescriptor: descriptor)
    }

    private static func start() -> Worker? {
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else { return nil }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends[1], STDIN_FILENO)
        posix_spawn_file_actions_adddup2(&actions, ends[1], STDOUT_FILENO)
        // Nothing else of the daemon's: not /dev/fuse (the mount would outlive
        // the daemon), not the launcher's readiness pipe, not the store's lock.
        let closing = spawnClosesFrom(&actions, STDERR_FILENO + 1)
        guard closing == 0 else {
            close(ends[0])
            close(ends[1])
            Log.error("cannot start the facts reader: \(String(cString: strerror(closing)))")
            return nil
        }
        var pid: pid_t = 0
        let arguments = ["albumfs", "read-facts"]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let spawned = posix_spawn(&pid, "/proc/self/exe", &actions, nil, &argv, environ)
        close(ends[1])
        guard spawned == 0 else {
            close(ends[0])
            Log.error("cannot start the facts reader: \(String(cString: strerror(spawned)))")
            return nil
        }
        // Background work: a copy or a listing going on meanwhile comes first.
        // SCHED_IDLE: the worker runs only on a CPU nothing else wants (it
        // reads every file a copy writes: on 2 cores it would slow the copy);
        // nice 10 where that policy is refused.
        var parameters = sched_param(sched_priority: 0)
        if sched_setscheduler(pid, schedIdle, &parameters) != 0 {
            setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(pid), 10)
        }
        // And the idle I/O class: its reads come after everyone else's
        // (where the disk's scheduler keeps classes: BFQ; `none` and
        // mq-deadline mostly do not).
        #if arch(x86_64)
        _ = ioprioSet(ioprioSetNumber, ioprioWhoProcess, pid, ioprioClassIdle)
        #endif
        return Worker(pid: pid, socket: ends[0], lines: LineReader(descriptor: ends[0]))
    }

    private static func stop(_ worker: Worker) {
        kill(worker.pid, SIGKILL)
        close(worker.socket)
        var status: Int32 = 0
        while waitpid(worker.pid, &status, 0) < 0 && errno == EINTR {}
    }
}

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34), which the Glibc module does not export.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func spawnClosesFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32

/// SCHED_IDLE from <sched.h> (Linux), which the Glibc module does not export.
private let schedIdle: Int32 = 5

/// ioprio_set(2) through syscall(2) (neither is exported by the Glibc
/// module; glibc's x86_64 syscall() takes its arguments from registers
/// whatever the prototype): IOPRIO_WHO_PROCESS, IOPRIO_CLASS_IDLE.
@_silgen_name("syscall")
private func ioprioSet(_ number: Int, _ which: Int32, _ who: Int32, _ priority: Int32) -> Int
private let ioprioSetNumber = 251
private let ioprioWhoProcess: Int32 = 1
private let ioprioClassIdle: Int32 = 3 << 13
