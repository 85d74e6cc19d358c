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
/// "Its storage is freed at once (`df` shows it)" (SEMANTICS.md § Recently
/// Deleted) stays true because whatever needs the space waits for the queue
/// first: statfs, and every operation that allocates (a create, an open for
/// writing, a size change, fallocate); so does the end of a mount and of a
/// Library. Waiting is one atomic check when nothing is pending. A crash
/// before the queue ran loses nothing: the next mount frees what
/// pending_purges still lists.
final class DeferredFrees: Sendable {
    private let queue = DispatchQueue(label: "albumfs.deferred-frees")
    private let group = DispatchGroup()
    /// Nodes whose data is freed and whose purge is not done yet.
    private let freed = Mutex<[NodeID]>([])

    /// Runs `free` for `ids` after every free queued before it; their ids
    /// are then handed out by `takeFreed`.
    func enqueue(_ ids: [NodeID], _ free: @escaping @Sendable ([NodeID]) -> Void) {
        queue.async(group: group) { [self] in
            free(ids)
            freed.withLock { $0 += ids }
        }
    }

    /// Returns once every free queued so far has run.
    func wait() {
        group.wait()
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
