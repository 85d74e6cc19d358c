import AlbumCore
import CFuse3
import Dispatch
import Synchronization

/// Tells the kernel what a ChangeSet made stale, before the reply, so that
/// whatever runs after the call returned sees its effect everywhere
/// (SEMANTICS.md § Visibility):
///
/// - cached attributes and directory listings (`notify_inval_inode`), on the
///   request's own thread: the kernel takes no directory lock for these;
/// - cached names (`notify_inval_entry`): the kernel locks the name's
///   directory for these, and a request in flight may hold that lock while
///   it waits for a lock our own request holds (a rename locks both its
///   directories), so they are sent from a thread of their own and waited
///   for only up to `nameBound`. Past the bound the reply goes anyway (the
///   invalidation lands as soon as the other request can finish, which our
///   reply lets it do); how often that happened is logged at unmount.
final class Invalidator: Sendable {
    /// The session, behind its own lock.
    private let session = Mutex<Session?>(nil)
    private let senders = DispatchQueue(label: "albumfs.invalidations", attributes: .concurrent)
    private let inFlight = DispatchGroup()
    static let nameBound: DispatchTimeInterval = .milliseconds(25)
    private let nameBatches = Atomic<Int>(0)
    private let lateBatches = Atomic<Int>(0)

    /// libfuse's session pointer; libfuse allows notifications from any thread.
    private struct Session: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    func attach(_ pointer: OpaquePointer) { session.withLock { $0 = Session(pointer: pointer) } }

    /// Everything `changes` made stale, before the request's reply.
    func invalidate(_ changes: ChangeSet) {
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
        guard !changes.entries.isEmpty else { return }
        let sent = DispatchSemaphore(value: 0)
        inFlight.enter()
        senders.async { [self] in
            defer { inFlight.leave() }
            if let session = self.session.withLock({ $0?.pointer }) {
                for entry in changes.entries {
                    entry.name.withUnsafeBufferPointer { name in
                        name.withMemoryRebound(to: CChar.self) { chars in
                            _ = fuse_lowlevel_notify_inval_entry(session, entry.directory, chars.baseAddress, chars.count)
                        }
                    }
                }
            }
            sent.signal()
        }
        nameBatches.add(1, ordering: .relaxed)
        // Two requests that each wait for a name in the other's directory
        // both sit out the bound, then reply: it is short for that reason.
        if sent.wait(timeout: .now() + Self.nameBound) == .timedOut {
            lateBatches.add(1, ordering: .relaxed)
        }
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

    /// Waits for notifications under way, then stops sending (before the session goes).
    func drain() {
        _ = inFlight.wait(timeout: .now() + .seconds(10))
        session.withLock { $0 = nil }
        let late = lateBatches.load(ordering: .relaxed)
        if late > 0 {
            Log.error("\(late) of \(nameBatches.load(ordering: .relaxed)) requests replied before their name "
                      + "invalidations landed (another request held the directory)")
        }
    }
}
