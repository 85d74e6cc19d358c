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
    /// The ids freed, in the order they were freed.
    final class Record: Sendable {
        let freed = Mutex<[NodeID]>([])
        var ids: [NodeID] { freed.withLock { $0 } }
    }

    private func frees(recordingInto record: Record) -> DeferredFrees {
        DeferredFrees { ids in record.freed.withLock { $0 += ids } }
    }

    @Test("wait() returns once every free enqueued before it ran, in enqueue order, without waiting out the gathering")
    func waitRunsWhatIsGathering() {
        let record = Record()
        let frees = frees(recordingInto: record)
        for id in NodeID(1)...NodeID(300) { frees.enqueue([id]) }
        frees.wait()
        #expect(record.ids == Array(1...300))
        #expect(frees.takeFreed(batch: 300) == Array(1...300), "each freed id is handed out once for its purge to be done")
        #expect(frees.takeFreed(batch: 1) == [])
        frees.wait()
        #expect(record.ids.count == 300, "a free ran twice")
    }

    @Test("frees enqueued while one is gathering join its run (an Empty Trash wakes the queue once, not once a purge)")
    func frequentFreesRunTogether() {
        let record = Record()
        // A gathering no machine outlasts: every free below comes within it,
        // whatever the load, and wait() runs what is gathered.
        let frees = DeferredFrees(gathering: .seconds(600)) { ids in record.freed.withLock { $0 += ids } }
        for id in NodeID(1)...NodeID(20) { frees.enqueue([id]) }
        #expect(frees.scheduledRuns == 1, "20 frees scheduled \(frees.scheduledRuns) runs")
        frees.wait()
        #expect(record.ids == Array(1...20))
        #expect(frees.runs == 1, "the queue ran \(frees.runs) times for 20 frees")
        frees.enqueue([21])
        #expect(frees.scheduledRuns == 2, "a free after a run starts a new gathering")
        frees.wait()
        #expect(record.ids == Array(1...21))
    }

    @Test("with nobody waiting, a free still runs once its gathering is over")
    func freesRunWithoutAWaiter() {
        let record = Record()
        let frees = frees(recordingInto: record)
        frees.enqueue([7])
        // When is eventual by design (DeferredFrees.gathering): poll, bounded at 10 s.
        let deadline = DispatchTime.now().uptimeNanoseconds + 10_000_000_000
        while record.ids.isEmpty && DispatchTime.now().uptimeNanoseconds < deadline {
            usleep(1_000)
        }
        #expect(record.ids == [7])
        #expect(frees.runs == 1)
    }
}
