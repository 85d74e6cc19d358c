#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A lock whose waiters sleep at once (a plain `pthread_mutex_t`), for a
/// value held for long stretches: the database, held for whole
/// transactions. The standard library's `Mutex` spins first (1,000 `pause`
/// instructions on x86 before it asks the kernel), which is right for short
/// critical sections and wrong for these: on a 2-core machine a spinning
/// FUSE worker takes the core the lock's holder, or the program that waits
/// for the reply, needs.
///
/// Also for any lock held while a kernel notification or ioctl is sent:
/// those can wait, and a waiter must sleep, not spin (Library's delivery of
/// background changes, Passthrough's backing files).
///
/// It is an error-checking mutex: a thread that locks it again while it holds
/// it stops the program with a message, as `Mutex` does, instead of hanging
/// the mount for good.
///
/// Background work takes it `behindOthers`: only while no other caller
/// waits for it, so a request never waits behind more than the one hold of
/// background work under way (a mutex lets the thread that just let go take
/// it again before a woken waiter can: a loop of short background holds
/// would keep a request waiting for all of them).
public final class BlockingLock<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Where background callers wait while others wait for the mutex.
    private let turn: UnsafeMutablePointer<pthread_cond_t>
    private var value: Value
    /// Callers (not behind others) waiting for the mutex, or about to.
    private let waiting = Atomic<Int>(0)
    /// Background callers waiting on `turn` (under the mutex).
    private var deferred = 0

    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        turn = .allocate(capacity: 1)
        turn.initialize(to: pthread_cond_t())
        pthread_cond_init(turn, nil)
    }

    deinit {
        pthread_cond_destroy(turn)
        turn.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` holding the lock; `behindOthers` (background work): only
    /// once no other caller is waiting for it.
    public func withLock<T, E: Error>(behindOthers: Bool = false, _ body: (inout Value) throws(E) -> T) throws(E) -> T {
        if behindOthers {
            lock()
            while waiting.load(ordering: .acquiring) > 0 {
                deferred += 1
                pthread_cond_wait(turn, mutex)
                deferred -= 1
            }
        } else {
            waiting.add(1, ordering: .releasing)
            lock()
            waiting.subtract(1, ordering: .releasing)
        }
        defer {
            // Background work waits for its turn: it may be now.
            if deferred > 0 { pthread_cond_broadcast(turn) }
            pthread_mutex_unlock(mutex)
        }
        return try body(&value)
    }

    /// Callers (not behind others) waiting for the lock now (tests).
    var waitingCount: Int { waiting.load(ordering: .acquiring) }

    private func lock() {
        let status = pthread_mutex_lock(mutex)
        if status != 0 { fatalError("BlockingLock: locked again by the thread that holds it (error \(status))") }
    }
}
