import Glibc
import Synchronization

/// Messages to standard error with one write(2) each, so lines from
/// concurrent threads never interleave (the C `stderr` global is not
/// concurrency-safe in Swift 6); a detached daemon, which has no terminal,
/// sends them to syslog instead, where the journal picks them up.
public enum Log {
    private static let toSyslog = Atomic<Bool>(false)

    public static func error(_ message: String) {
        log(LOG_ERR, message)
    }

    /// What the daemon decided, once per mount (e.g. its data path).
    public static func info(_ message: String) {
        log(LOG_INFO, message)
    }

    private static func log(_ priority: Int32, _ message: String) {
        if toSyslog.load(ordering: .relaxed) {
            message.withCString { text in withVaList([text]) { vsyslog(priority, "%s", $0) } }
        } else {
            write("albumfs: " + message + "\n")
        }
    }

    /// From now on, messages go to syslog as `albumfs[PID]` (facility daemon).
    public static func useSystemLog() {
        openlog(nil, LOG_PID | LOG_NDELAY, LOG_DAEMON)
        toSyslog.store(true, ordering: .relaxed)
    }

    private static func write(_ line: String) {
        var line = line
        line.withUTF8 { bytes in _ = Glibc.write(2, bytes.baseAddress, bytes.count) }
    }
}
