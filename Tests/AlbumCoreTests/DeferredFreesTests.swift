#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization
import Testing
@testable import AlbumCore

/// SEMANTICS.md § Recently Deleted ("its storage is freed at once"): a
/// purge's free runs off the request's path, gathered with the frees of the
/// purges right after it; whatever needs the space waits for every free
/// enqueued before it.
@Suite("Deferred frees: gathered, in order, and waited for")
struct DeferredFreesTests {
    /// The ids the frees were given, in the order they ran.
    final class Record: Sendable {
        let freed = Mutex<[NodeID]>([])
    }

    private func enqueue(_ frees: DeferredFrees, _ ids: ClosedRange<NodeID>, into record: Record) {
        for id in ids {
            frees.enqueue([id]) { ids in record.freed.withLock { $0 += ids } }
        }
    }

    @Test("wait() returns once every free enqueued before it ran, in enqueue order, without waiting out the gathering")
    func waitRunsWhatIsGathering() {
        let frees = DeferredFrees()
        let record = Record()
        enqueue(frees, 1...300, into: record)
        frees.wait()
        #expect(record.freed.withLock { $0 } == Array(1...300))
        #expect(frees.takeFreed(batch: 300) == Array(1...300), "each freed id is handed out once for its purge to be done")
        #expect(frees.takeFreed(batch: 1) == [])
        frees.wait()
        #expect(record.freed.withLock { $0.count } == 300, "a free ran twice")
    }

    @Test("without a wait, frees run by themselves soon after, gathered: purges 0.5 ms apart wake the queue a few times, not once each")
    func frequentFreesRunTogether() {
        let frees = DeferredFrees()
        let record = Record()
        // An Empty Trash sends a purge every few tenths of a millisecond.
        for id in NodeID(1)...NodeID(20) {
            frees.enqueue([id]) { ids in record.freed.withLock { $0 += ids } }
            usleep(500)
        }
        // Eventual by design (the gathering time): poll, bounded at 10 s.
        let deadline = DispatchTime.now().uptimeNanoseconds + 10_000_000_000
        while record.freed.withLock({ $0.count }) < 20 && DispatchTime.now().uptimeNanoseconds < deadline {
            usleep(1_000)
        }
        #expect(record.freed.withLock { $0 } == Array(1...20))
        #expect(frees.takeFreed(batch: 20).count == 20)
        // 20 × 0.5 ms against a 10 ms gathering: 1 to 3 runs, more only if
        // this thread slept far longer than asked; a run a free without it.
        #expect(frees.runs <= 10, "the queue ran \(frees.runs) times for 20 frees")
    }
}
