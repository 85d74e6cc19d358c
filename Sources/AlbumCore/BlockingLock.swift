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
final class BlockingLock<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<T, E: Error>(_ body: (inout Value) throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
