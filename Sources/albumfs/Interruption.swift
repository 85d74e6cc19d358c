import Glibc
import Synchronization

/// Ctrl-C (SIGINT), SIGTERM and SIGHUP during a long command: the handler
/// only records the signal; the command looks at `received` between steps
/// (and between the chunks of a big file), stops cleanly, cleans up and
/// exits with 128 + the signal. SA_RESTART: a read or write through the
/// mount is never cut short by the signal.
enum Interruption {
    private static let signalNumber = Atomic<Int32>(0)
    static let handled: [Int32] = [SIGINT, SIGTERM, SIGHUP]

    static func install() {
        _ = signalNumber.load(ordering: .relaxed)   // initialised before any handler can run
        for signal in handled {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { received in
                Interruption.signalNumber.store(received, ordering: .relaxed)
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            sigaction(signal, &action, nil)
        }
    }

    /// The signal that asked us to stop, if one did.
    static var received: Int32? {
        let value = signalNumber.load(ordering: .relaxed)
        return value == 0 ? nil : value
    }

    /// Runs `body` with the handled signals blocked: a mount or an unmount
    /// is never cut in the middle (a signal that comes meanwhile is recorded
    /// when they are unblocked, right after).
    static func deferred<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        var blocked = sigset_t(), previous = sigset_t()
        sigemptyset(&blocked)
        for signal in handled { sigaddset(&blocked, signal) }
        sigprocmask(SIG_BLOCK, &blocked, &previous)
        defer { sigprocmask(SIG_SETMASK, &previous, nil) }
        return try body()
    }
}
