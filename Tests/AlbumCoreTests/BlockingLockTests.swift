import Dispatch
import Glibc
import Testing
@testable import AlbumCore

@Suite("BlockingLock")
struct BlockingLockTests {
    /// The database lock must exclude: 8 threads adding to a plain Int under it
    /// lose no increment.
    @Test func excludesOtherThreads() {
        final class Counter: @unchecked Sendable { var value = 0 }
        let lock = BlockingLock(Counter())
        let threads = 8, rounds = 20_000
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<rounds {
                lock.withLock { counter in
                    let seen = counter.value
                    counter.value = seen + 1
                }
            }
        }
        #expect(lock.withLock { $0.value } == threads * rounds)
    }

    /// A throwing body leaves the lock free (another thread gets it within
    /// 5 s) and its error reaches the caller.
    @Test func releasesOnThrow() {
        struct Refused: Error {}
        let lock = BlockingLock(0)
        #expect(throws: Refused.self) {
            try lock.withLock { (_: inout Int) throws(Refused) in throw Refused() }
        }
        let acquired = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            lock.withLock { $0 += 1 }
            acquired.signal()
        }
        #expect(acquired.wait(timeout: .now() + 5) == .success)
    }

    /// Locking it again on the thread that holds it stops the program with
    /// fatalError's trap (as `Mutex` does) rather than hanging the mount. A
    /// lock that hangs instead dies of the alarm after 30 s: another signal.
    @Test func lockingAgainOnTheHoldingThreadStopsTheProgram() async {
        await #expect(processExitsWith: .signal(SIGILL)) {
            alarm(30)
            let lock = BlockingLock(0)
            lock.withLock { _ in lock.withLock { $0 += 1 } }
        }
    }
}
