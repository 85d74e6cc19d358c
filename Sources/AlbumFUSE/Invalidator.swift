import AlbumCore
import CFuse3
import Dispatch

/// Tells the kernel what a ChangeSet made stale, in two steps around the reply:
///
/// - before the reply, on the request's thread: cached attributes and
///   directory listings (`notify_inval_inode`). The kernel takes no directory
///   lock for these, so this cannot deadlock, and the caller's next `ls` or
///   `stat` is sure to see the change;
/// - after the reply, from a serial queue: cached names
///   (`notify_inval_entry`). The kernel locks the entry's directory for
///   these, which a request in flight may hold while it waits for us, so
///   they must never be sent from a request's thread (see FileSystem.swift).
///   Until one lands, a stale name can still resolve, but its attributes are
///   already gone, so the next stat asks us and gets ENOENT.
final class Invalidator: @unchecked Sendable {
    // The session pointer is set once before the loop starts and cleared in
    // `drain`, both on the queue. Hence @unchecked.
    private var session: OpaquePointer?
    private let queue = DispatchQueue(label: "albumfs.invalidations")

    func attach(_ session: OpaquePointer?) { queue.sync { self.session = session } }

    /// Step one: before the reply.
    func beforeReply(_ changes: ChangeSet) {
        guard let session = queue.sync(execute: { self.session }) else { return }
        for node in changes.nodes {
            // A negative offset drops the cached attributes only.
            _ = fuse_lowlevel_notify_inval_inode(session, node, -1, 0)
        }
        for directory in changes.directories {
            // Offset 0, length 0: attributes and every cached page, which for
            // a directory is its cached listing.
            _ = fuse_lowlevel_notify_inval_inode(session, directory, 0, 0)
        }
    }

    /// Step two: after the reply.
    func afterReply(_ changes: ChangeSet) {
        guard !changes.entries.isEmpty else { return }
        queue.async { [self] in
            guard let session else { return }
            for entry in changes.entries {
                entry.name.withUnsafeBufferPointer { name in
                    name.withMemoryRebound(to: CChar.self) { chars in
                        _ = fuse_lowlevel_notify_inval_entry(session, entry.directory, chars.baseAddress, chars.count)
                    }
                }
            }
        }
    }

    /// Waits for queued notifications, then stops sending (before the session goes).
    func drain() {
        queue.sync { session = nil }
    }
}
