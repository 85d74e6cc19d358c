import AlbumCore
import CFuse3
import Dispatch

/// Sends the kernel cache invalidations a ChangeSet asks for, from its own
/// serial queue, after the request that caused them has been answered (see
/// the deadlock note in FileSystem.swift).
final class Invalidator: @unchecked Sendable {
    // The session pointer is set once before the loop starts and cleared
    // after `drain`; the queue is the only reader. Hence @unchecked.
    private var session: OpaquePointer?
    private let queue = DispatchQueue(label: "albumfs.invalidations")

    func attach(_ session: OpaquePointer?) { queue.sync { self.session = session } }

    func send(_ changes: ChangeSet) {
        guard !changes.isEmpty else { return }
        queue.async { [self] in
            guard let session else { return }
            for entry in changes.entries {
                entry.name.withUnsafeBufferPointer { name in
                    name.withMemoryRebound(to: CChar.self) { chars in
                        _ = fuse_lowlevel_notify_inval_entry(session, entry.directory, chars.baseAddress, chars.count)
                    }
                }
            }
            for node in changes.nodes {
                // A negative offset drops the cached attributes only.
                _ = fuse_lowlevel_notify_inval_inode(session, node, -1, 0)
            }
        }
    }

    /// Waits for queued notifications, then stops sending (before the session goes).
    func drain() {
        queue.sync { session = nil }
    }
}
