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

    /// Background work (`behindOthers`) never keeps a caller waiting beyond the
    /// one hold under way: the background thread lets go and at once asks
    /// again, and the caller that was waiting goes first. (A plain mutex lets
    /// the thread that let go take it again before the woken waiter runs:
    /// the indexer's scan of a library of 1,000,000 kept the first request
    /// after a mount waiting 0.2 to 0.4 s.)
    @Test func backgroundWorkGoesBehindAWaitingCaller() {
        let lock = BlockingLock([String]())
        let holding = DispatchSemaphore(value: 0), letGo = DispatchSemaphore(value: 0)
        let backgroundDone = DispatchSemaphore(value: 0), callerDone = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            lock.withLock(behindOthers: true) { order in
                order.append("background 1")
                holding.signal()
                letGo.wait()
            }
            lock.withLock(behindOthers: true) { $0.append("background 2") }
            backgroundDone.signal()
        }
        #expect(holding.wait(timeout: .now() + 10) == .success)
        DispatchQueue.global().async {
            lock.withLock { $0.append("caller") }
            callerDone.signal()
        }
        // The caller is waiting for the lock (an event; 10 s at most).
        let deadline = DispatchTime.now() + 10
        while lock.waitingCount == 0 && DispatchTime.now() < deadline { usleep(1000) }
        #expect(lock.waitingCount == 1, "the caller never came to wait for the lock")
        letGo.signal()
        #expect(callerDone.wait(timeout: .now() + 10) == .success && backgroundDone.wait(timeout: .now() + 10) == .success)
        #expect(lock.withLock { $0 } == ["background 1", "caller", "background 2"])
    }
}
