import AlbumCore
import CFuse3
import Dispatch
import Synchronization

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
final class Invalidator: Sendable {
    /// The session, behind its own lock. Never reach it through `queue`: the
    /// queue may be blocked in the kernel on a directory lock that the very
    /// request calling `beforeReply` holds.
    private let session = Mutex<Session?>(nil)
    private let queue = DispatchQueue(label: "albumfs.invalidations")

    /// libfuse's session pointer; libfuse allows notifications from any thread.
    private struct Session: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    func attach(_ pointer: OpaquePointer) { session.withLock { $0 = Session(pointer: pointer) } }

    /// Step one: before the reply.
    func beforeReply(_ changes: ChangeSet) {
        guard let session = session.withLock({ $0?.pointer }) else { return }
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

    /// Drops `node`'s cached attributes, before the reply to a request that
    /// changed them without the reply saying so (an open clearing set-ID bits).
    func attributesChanged(_ node: NodeID) {
        guard let session = session.withLock({ $0?.pointer }) else { return }
        _ = fuse_lowlevel_notify_inval_inode(session, node, -1, 0)
    }

    /// Directories the kernel listed from the start since their listing was
    /// last dropped here: the ones whose listing it may have cached.
    private let listed = Mutex<Set<NodeID>>([])

    /// The kernel asked for `directory`'s listing from offset 0 (and will cache it).
    func listing(_ directory: NodeID) {
        listed.withLock { _ = $0.insert(directory) }
    }

    /// Whether any cached listing is known (if not, `closed` has nothing to do).
    var hasCachedListings: Bool { listed.withLock { !$0.isEmpty } }

    /// A file's last handle is gone. The kernel has marked part of the
    /// file's attributes stale (the atime after any read, size and mtime
    /// after a passthrough write), so its next stat asks us: one round trip
    /// per file, which makes a no-change `rsync` of an album of photos twice
    /// as slow as on a plain disk. Dropping the cached listings that show the
    /// file turns that into a READDIRPLUS at the next listing, which brings
    /// fresh attributes for a whole batch of entries per request. Each
    /// listing is dropped once per time the kernel lists it.
    func closed(shownIn directories: [NodeID]) {
        let stale = listed.withLock { listed in directories.filter { listed.remove($0) != nil } }
        guard !stale.isEmpty, let session = session.withLock({ $0?.pointer }) else { return }
        for directory in stale {
            _ = fuse_lowlevel_notify_inval_inode(session, directory, 0, 0)
        }
    }

    /// Step two: after the reply.
    func afterReply(_ changes: ChangeSet) {
        guard !changes.entries.isEmpty else { return }
        queue.async { [self] in
            guard let session = session.withLock({ $0?.pointer }) else { return }
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
        queue.sync {}
        session.withLock { $0 = nil }
    }
}
