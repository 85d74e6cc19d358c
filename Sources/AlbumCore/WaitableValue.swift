#if canImport(Glibc)
import Glibc
#endif

/// A value that threads wait on: changed under its lock, and every change
/// wakes the waiters, who look again (a pthread mutex and a condition on
/// CLOCK_MONOTONIC; waiters sleep, never spin). A download's readers wait
/// on it for their chunks.
final class WaitableValue<Value>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var value: Value

    init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        condition.deallocate()
    }

    /// Reads or changes the value; the waiters look again after it.
    func withLock<T>(_ body: (inout Value) -> T) -> T {
        pthread_mutex_lock(mutex)
        defer {
            pthread_cond_broadcast(condition)
            pthread_mutex_unlock(mutex)
        }
        return body(&value)
    }

    /// Waits until `body` answers, or until the time `deadline` gives (in
    /// `Self.now()`'s seconds, asked again after every change) has passed:
    /// then nil.
    func wait<T>(deadline: (Value) -> Double, _ body: (inout Value) -> T?) -> T? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while true {
            if let answer = body(&value) { return answer }
            let until = deadline(value)
            guard until > Self.now() else { return nil }
            var time = timespec(tv_sec: Int(until), tv_nsec: Int((until - until.rounded(.down)) * 1e9))
            _ = pthread_cond_timedwait(condition, mutex, &time)
        }
    }

    /// Seconds on CLOCK_MONOTONIC.
    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
