#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import AlbumCore

@Suite("IdleThread: background work at idle priority")
struct IdleThreadTests {
    @Test("the body runs on another thread at SCHED_IDLE (or nice 19 where refused), its result and its error come back, the caller's priority is untouched")
    func runsIdle() throws {
        let caller = pthread_self()
        let (policy, nice, other) = try IdleThread.run {
            (sched_getscheduler(0), getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0), pthread_equal(pthread_self(), caller) == 0)
        }
        #expect(other)
        #expect(policy == 5 || nice == 19, "SCHED_IDLE is 5")
        #expect(sched_getscheduler(0) == 0, "the caller stays SCHED_OTHER")
        #expect(throws: LibraryError.notFound) { try IdleThread.run { throw LibraryError.notFound } }
    }
}
