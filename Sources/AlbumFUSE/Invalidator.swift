import AlbumCore
import CFuse3
import Dispatch
import Glibc
import Synchronization

/// Tells the kernel what a ChangeSet made stale, before the reply, so that
/// when a call returns every path shows its effect (SEMANTICS.md,
/// "Visibility"):
///
/// - on the request's thread: cached attributes and directory listings
///   (`notify_inval_inode`). The kernel takes no directory lock for these,
///   so this cannot deadlock;
/// - from a serial queue, waited for at most `nameWait`: cached names
///   (`notify_inval_entry`). The kernel locks the name's directory for
///   these, which another request in flight may hold while it waits for a
///   reply (possibly one queued behind ours), so they are never sent from a
///   request's thread, and the wait is bounded: past the bound the request
///   replies anyway and the names land as soon as that lock is free.
///   Names in the directories the request itself locked (a rename's two
///   parents, other than the two names it moves) cannot be sent before the
///   reply. On Linux 6.16+ the request then bumps the connection's epoch
///   before it replies (FUSE_NOTIFY_INC_EPOCH: no lock, every cached name of
///   the mount is looked up again at its next use), so that these names are
///   right when the call returns too; on older kernels they are sent after
///   the reply (`aroundReply`), and a caller racing the reply may see the old
///   name for that moment.
///
/// Names are never sent from a request's thread, not even names outside
/// every directory its caller holds: another caller may hold such a
/// directory while it waits in the kernel for a lock this request's caller
/// holds (an `ln` into an album holds the album and waits for the file an
/// `rm` holds; a drag from the roll into an album holds the album and waits
/// for the roll), and that caller has no request in flight for any worker
/// to answer. The queue costs a request two thread switches.
final class Invalidator: Sendable {
    /// The session, behind its own lock. Never reach it through `queue`: the
    /// queue may be blocked in the kernel on a directory lock that the very
    /// request calling `beforeReply` or `aroundReply` holds.
    private let session = Mutex<Session?>(nil)
    private let queue = DispatchQueue(label: "albumfs.invalidations")
    /// How long a request waits for its name invalidations before replying.
    static let nameWaitMilliseconds = 100
    static let nameWait = DispatchTimeInterval.milliseconds(nameWaitMilliseconds)
    /// Requests whose names landed before their reply, and those that
    /// replied at the bound (reported at unmount).
    private let namesInTime = Atomic<Int>(0)
    private let namesPastBound = Atomic<Int>(0)
    /// Whether the kernel took an epoch bump (cleared at its first refusal)
    /// and how many requests bumped it (reported at unmount).
    private let epochWorks = Atomic<Bool>(true)
    private let epochBumps = Atomic<Int>(0)

    /// libfuse's session pointer; libfuse allows notifications from any thread.
    private struct Session: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    func attach(_ pointer: OpaquePointer) {
        session.withLock { $0 = Session(pointer: pointer) }
    }

    /// Before the reply of a request whose caller holds no directory the
    /// changes name (a create, a setxattr), or of a change made outside any
    /// request: attributes, listings and names.
    func beforeReply(_ changes: ChangeSet) {
        _ = invalidate(changes, locked: [], own: [])
    }

    /// Around the reply of a request whose caller holds directories
    /// (`holding`: an unlink's one, a rename's two). Before `reply`:
    /// attributes, listings, and the names outside those directories; for
    /// the names inside them (other than the request's own, `moving`, which
    /// the kernel updates itself), the epoch, where the kernel has one, and
    /// else those names right after `reply`, when the kernel lets go of the
    /// locks.
    func aroundReply(_ changes: ChangeSet, holding locked: [NodeID], moving own: [ChangeSet.EntryName] = [],
                     _ reply: () -> Void) {
        let namesAfterReply = invalidate(changes, locked: locked, own: own)
        reply()
        guard namesAfterReply else { return }
        let names = changes.entries.filter { locked.contains($0.directory) }
        queue.async { [self] in send(names) }
    }

    /// Everything but the names in `locked`; returns whether those still
    /// have to go after the reply.
    private func invalidate(_ changes: ChangeSet, locked: [NodeID], own: [ChangeSet.EntryName]) -> Bool {
        guard let session = session.withLock({ $0?.pointer }) else { return false }
        let lockedNames = changes.entries.filter { locked.contains($0.directory) }
        let epochBumped = lockedNames.contains { !own.contains($0) } && bumpEpoch(session)
        let namesAfterReply = !lockedNames.isEmpty && !epochBumped
        for node in changes.nodes {
            // A negative offset drops the cached attributes only.
            _ = fuse_lowlevel_notify_inval_inode(session, node, -1, 0)
        }
        for directory in changes.directories {
            // Offset 0, length 0: attributes and every cached page, which for
            // a directory is its cached listing.
            _ = fuse_lowlevel_notify_inval_inode(session, directory, 0, 0)
        }
        let names = changes.entries.filter { !locked.contains($0.directory) }
        guard !names.isEmpty else { return namesAfterReply }
        let sent = DispatchSemaphore(value: 0)
        queue.async { [self] in
            send(names)
            sent.signal()
        }
        if sent.wait(timeout: .now() + Self.nameWait) == .success {
            namesInTime.add(1, ordering: .relaxed)
        } else {
            namesPastBound.add(1, ordering: .relaxed)
        }
        return namesAfterReply
    }

    /// FUSE_NOTIFY_INC_EPOCH (Linux 6.16+, protocol 7.44): every cached name
    /// of the mount is revalidated at its next use. The kernel takes no lock
    /// for it. libfuse 3.14 predates it, so the notification (a bare header:
    /// error = its code, unique = 0) is written to /dev/fuse here. An older
    /// kernel refuses the code (EINVAL): then never again.
    private func bumpEpoch(_ session: OpaquePointer) -> Bool {
        guard epochWorks.load(ordering: .relaxed) else { return false }
        var header = fuse_out_header(len: UInt32(MemoryLayout<fuse_out_header>.size), error: Self.incrementEpoch, unique: 0)
        let written = Glibc.write(fuse_session_fd(session), &header, MemoryLayout<fuse_out_header>.size)
        guard written == MemoryLayout<fuse_out_header>.size else {
            epochWorks.store(false, ordering: .relaxed)
            return false
        }
        epochBumps.add(1, ordering: .relaxed)
        return true
    }

    /// FUSE_NOTIFY_INC_EPOCH's code (the 6.1 uapi header has no name for it).
    static let incrementEpoch: Int32 = 8

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

    private func send(_ names: [ChangeSet.EntryName]) {
        guard let session = session.withLock({ $0?.pointer }) else { return }
        for entry in names {
            entry.name.withUnsafeBufferPointer { name in
                name.withMemoryRebound(to: CChar.self) { chars in
                    _ = fuse_lowlevel_notify_inval_entry(session, entry.directory, chars.baseAddress, chars.count)
                }
            }
        }
    }

    /// Waits for queued notifications, then stops sending (before the session
    /// goes), and reports how often a request replied at the bound.
    func drain() {
        queue.sync {}
        session.withLock { $0 = nil }
        let (inTime, late) = (namesInTime.load(ordering: .relaxed), namesPastBound.load(ordering: .relaxed))
        let bumps = epochBumps.load(ordering: .relaxed)
        if bumps > 0 {
            Log.info("requests that changed other names in their own directories: \(bumps) (each dropped every cached name)")
        }
        guard inTime + late > 0 else { return }
        let line = "name invalidations before the reply: \(inTime + late) requests sent theirs through the queue"
        if late > 0 {
            Log.error(line + ", \(late) of them replied at the \(Self.nameWaitMilliseconds) ms bound")
        } else {
            Log.info(line)
        }
    }
}
