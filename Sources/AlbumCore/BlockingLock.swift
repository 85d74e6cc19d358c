#if canImport(Glibc)
import Glibc
#endif

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
public final class BlockingLock<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func withLock<T, E: Error>(_ body: (inout Value) throws(E) -> T) throws(E) -> T {
        let status = pthread_mutex_lock(mutex)
        if status != 0 { fatalError("BlockingLock: locked again by the thread that holds it (error \(status))") }
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
