import Dispatch
import Synchronization

/// Frees the data of purged assets off the request's path.
///
/// A purge commits first and frees its content files after (the
/// pending_purges protocol). Unlinking a content file is the slow half of a
/// purge: ext4 evicts the inode there, and on a `discard` mount waits for
/// the device to trim its blocks. Done on this one serial queue, the request
/// replies first and the next one (a file manager's Empty Trash sends them
/// one after another) overlaps with the unlink.
///
/// Frees are gathered for `gathering` before the queue runs them: a burst of
/// purges wakes the queue's thread once, not once a purge (on two cores
/// each wake-up cost a purge about a tenth of its time).
///
/// "Its storage is freed at once (`df` shows it)" (SEMANTICS.md § Recently
/// Deleted) stays true because whatever needs the space waits for the frees
/// first, and runs those still gathering itself: statfs, and every operation
/// that allocates (a create, an open for writing, a size change,
/// fallocate); so does the end of a mount and of a Library. Waiting is one
/// atomic load when nothing is pending. A crash before a free ran loses
/// nothing: the next mount frees what pending_purges still lists.
final class DeferredFrees: Sendable {
    /// How long a free waits for others to join it.
    static let gathering = DispatchTimeInterval.milliseconds(10)
    private let gathering: DispatchTimeInterval

    /// Frees the data of the nodes it is given (their content files).
    private let free: @Sendable ([NodeID]) -> Void
    private let queue = DispatchQueue(label: "albumfs.deferred-frees")
    /// Nodes whose free is not taken by a run yet, and whether a run is
    /// scheduled for them.
    private let gathered = Mutex<(ids: [NodeID], scheduled: Bool)>(([], false))
    /// Nodes enqueued and not freed yet (gathered or in a run).
    private let unfinished = Atomic<Int>(0)
    /// Nodes whose data is freed and whose purge is not done yet.
    private let freed = Mutex<[NodeID]>([])
    /// How many runs freed anything (a burst should take one).
    private let runCount = Atomic<Int>(0)
    var runs: Int { runCount.load(ordering: .relaxed) }
    /// How many times a run was scheduled (the queue's thread woken).
    private let scheduledCount = Atomic<Int>(0)
    var scheduledRuns: Int { scheduledCount.load(ordering: .relaxed) }

    init(gathering: DispatchTimeInterval = DeferredFrees.gathering, free: @escaping @Sendable ([NodeID]) -> Void) {
        self.gathering = gathering
        self.free = free
    }

    /// Frees the data of `ids` soon, in order with every other free; the ids
    /// are then handed out by `takeFreed`.
    func enqueue(_ ids: [NodeID]) {
        unfinished.add(ids.count, ordering: .sequentiallyConsistent)
        let schedule = gathered.withLock { gathered in
            gathered.ids += ids
            defer { gathered.scheduled = true }
            return !gathered.scheduled
        }
        if schedule {
            scheduledCount.add(1, ordering: .relaxed)
            queue.asyncAfter(deadline: .now() + gathering) { [self] in runGathered() }
        }
    }

    /// Returns once every free enqueued so far has run: those gathering run
    /// now, on the queue (the caller's thread when the queue is idle).
    func wait() {
        guard unfinished.load(ordering: .sequentiallyConsistent) > 0 else { return }
        queue.sync { runGathered() }
    }

    /// On the queue only: one run at a time, in enqueue order.
    private func runGathered() {
        let ids = gathered.withLock { gathered in
            defer { gathered = ([], false) }
            return gathered.ids
        }
        guard !ids.isEmpty else { return }
        runCount.add(1, ordering: .relaxed)
        free(ids)
        freed.withLock { $0 += ids }
        unfinished.subtract(ids.count, ordering: .sequentiallyConsistent)
    }

    /// The nodes freed since the last call that took any (their pending
    /// purges can be done), once there are at least `batch` of them.
    func takeFreed(batch: Int) -> [NodeID] {
        freed.withLock { freed in
            guard freed.count >= batch else { return [] }
            defer { freed = [] }
            return freed
        }
    }
}
