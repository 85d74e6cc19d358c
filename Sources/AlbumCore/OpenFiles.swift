#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The size and times of assets that are open for writing, kept in memory so
/// writes need no database work. `flush` commits them.
///
/// Why this exists: `close()` returns before the kernel's RELEASE reaches the
/// daemon, so getattr and setattr must see the newest size and times at once,
/// and a late release must never overwrite a newer setattr. Both read and
/// update this one table.
///
/// Writes reach the content file one of two ways. Through `Library.write`:
/// each is recorded here (`wrote`: the size at once, the mtime the kernel
/// gave the data when the live state is next read). Or straight from the
/// kernel (FUSE passthrough): the daemon never sees them, so the handle's
/// descriptor is kept here as a "direct writer", and whoever reads the live
/// state first takes the content file's size and mtime in (`refresh`).
/// Either way the asset's mtime is the data's, so a mount after a lost
/// release, which takes it from the data, shows what `stat` showed (see
/// `ContentStore.setModificationTime`).
///
/// The lock rule: every method that changes the table, or reads it to lay
/// it over rows (`overlay`, `lastKnown`, which also take in what writes did),
/// runs under the database lock, where it is decided together with the rows:
/// it takes a `DatabaseHeld`, which only Library's lock helpers make. Two
/// changes go in without it, by design: a write through the daemon (`wrote`),
/// which only ever makes the live state newer, and the count of writes in
/// flight (`beginWriting`), which only keeps a mark from going; and three
/// reads (`isOpen`, `isOpenForWriting`, `filesOpenForWriting`), whose callers
/// say why a stale answer is safe.
///
/// The lock order (the database's, then this table's) is kept by structure:
/// this table's lock is private, and nothing runs under it but its own code,
/// which takes no other lock.
final class OpenFiles: Sendable {
    struct LiveFile {
        var openCount: Int
        var writerCount: Int
        var attributes: Attributes
        var dirty = false
        /// Bumped by every write, so a flush only marks clean what it committed.
        var generation: UInt64 = 0
        /// The asset has an `unfinished_writes` row: its data may be ahead of
        /// its committed size. Set before data can change, cleared when the
        /// size is committed and no handle is left that could write more.
        var marked = false
        /// Descriptors of writable handles the kernel writes through itself.
        var directWriters: [Int32] = []
        /// A handle the daemon wrote through since the data's mtime was last
        /// taken in: the next read of the live state takes it (`refresh`).
        var unstampedWrite: Int32?
        var needsRefresh: Bool { unstampedWrite != nil || !directWriters.isEmpty }
        /// The content file as `attributes` last took it in.
        var contentSeen = ContentStamp(size: -1, modified: 0)
        /// Size changes (setattr) committed whose cut of the data is still to
        /// come: the mark must stay until they are done.
        var pins = 0
        /// Writes between their mark check and their data: a flush must not
        /// take the mark meanwhile.
        var writing = 0

        /// What a commit must write of the live state: nothing if unchanged.
        var snapshot: Snapshot? { dirty ? Snapshot(attributes: attributes, generation: generation) : nil }

        /// Nothing is open, pinned, or left to commit: the entry can go.
        /// A last release whose commit failed leaves its file dirty or
        /// marked: kept, so that what `stat` showed is what a later commit
        /// writes (never the older row), and the mark stays with it.
        var isSettled: Bool { openCount <= 0 && pins == 0 && !dirty && !marked }
    }


    private let files = Mutex<[NodeID: LiveFile]>([:])
    /// Some last release did not commit: set and cleared under the database
    /// lock, read without it (a release looks at it once).
    let hasUnsettled = Atomic<Bool>(false)

    /// How many files have a writable handle open (their facts are to be read after it closes).
    var filesOpenForWriting: Int {
        files.withLock { files in files.values.count { $0.writerCount > 0 } }
    }

    /// Whether a handle that can write `id` is open (read without the
    /// database lock, like `overlay`: a writer that opens right after is
    /// seen by whoever checks again under the lock).
    func isOpenForWriting(_ id: NodeID) -> Bool {
        files.withLock { files in (files[id]?.writerCount ?? 0) > 0 }
    }

    /// Whether any handle of `id` is open (read without the database lock:
    /// for a purged asset the count only goes down).
    func isOpen(_ id: NodeID) -> Bool {
        files.withLock { files in (files[id]?.openCount ?? 0) > 0 }
    }

    func opened(_ attributes: Attributes, writable: Bool, _ held: borrowing DatabaseHeld) {
        files.withLock { files in
            var file = files[attributes.id] ?? LiveFile(openCount: 0, writerCount: 0, attributes: attributes)
            file.openCount += 1
            if writable { file.writerCount += 1 }
            files[attributes.id] = file
        }
    }

    /// From now on the kernel writes through `descriptor` without us.
    func addDirectWriter(_ id: NodeID, descriptor: Int32, _ held: borrowing DatabaseHeld) {
        files.withLock { files in
            guard var file = files[id] else { return }
            if file.directWriters.isEmpty, let stamp = ContentStamp(descriptor: descriptor) {
                // Whatever the data holds now is already in `attributes`.
                file.contentSeen = stamp
            }
            file.directWriters.append(descriptor)
            files[id] = file
        }
    }

    /// Takes in what writes changed since last seen: the mtime the kernel
    /// gave the data becomes the asset's (and its ctime), and for direct
    /// writes the data's size too (the daemon's own writes keep theirs
    /// exactly). The kernel's clock is coarse, up to a tick behind the
    /// daemon's: a stamp older than the asset's ctime (a create or setattr
    /// of the same tick) would put the write before what came first, so the
    /// data is stamped again with the daemon's time (no disk access).
    /// Taken lazily, not at each write: reading a file's times makes the
    /// kernel stamp its next change finely (multigrain timestamps, 6.13+),
    /// which dirties the inode at every write (an `fstat` a write cost 4 KiB
    /// writes through the daemon 18 %, `dd`, 12 interleaved rounds).
    private static func refresh(_ file: inout LiveFile) {
        guard let descriptor = file.unstampedWrite ?? file.directWriters.first,
              let stamp = ContentStamp(descriptor: descriptor) else { return }
        let daemonWrote = file.unstampedWrite != nil
        file.unstampedWrite = nil
        guard daemonWrote || stamp != file.contentSeen else { return }
        var modified = stamp.modified
        if modified < file.attributes.changeTime {
            let now = max(currentTime(), file.attributes.changeTime)
            if (try? ContentStore.setModificationTime(of: descriptor, to: now)) != nil { modified = now }
        }
        file.contentSeen = ContentStamp(size: stamp.size, modified: modified)
        if !file.directWriters.isEmpty { file.attributes.size = stamp.size }
        file.attributes.modificationTime = modified
        file.attributes.changeTime = max(file.attributes.changeTime, modified)
        file.dirty = true
        file.generation &+= 1
    }

    func isMarked(_ id: NodeID, _ held: borrowing DatabaseHeld) -> Bool {
        files.withLock { files in files[id]?.marked ?? false }
    }

    func setMarked(_ id: NodeID, _ marked: Bool, _ held: borrowing DatabaseHeld) {
        files.withLock { files in files[id]?.marked = marked }
    }

    enum WriteStart { case started, unmarked, notOpen }

    /// A write is about to change the data: counted if the asset is marked
    /// (else the caller marks it first), so that no flush takes the mark
    /// before `endWriting`.
    func beginWriting(_ id: NodeID) -> WriteStart {
        files.withLock { files in
            guard files[id] != nil else { return .notOpen }
            guard files[id]!.marked else { return .unmarked }
            files[id]!.writing += 1
            return .started
        }
    }

    func endWriting(_ id: NodeID) {
        files.withLock { files in files[id]?.writing -= 1 }
    }

    /// A committed size change whose data is still to be cut: `attributes`
    /// become the live state, and the asset stays marked until `unpin`.
    func pin(_ attributes: Attributes, _ held: borrowing DatabaseHeld) {
        files.withLock { files in
            var file = files[attributes.id] ?? LiveFile(openCount: 0, writerCount: 0, attributes: attributes)
            file.attributes = attributes
            file.pins += 1
            file.marked = true
            files[attributes.id] = file
        }
    }

    /// The cut is done. Returns whether the mark goes now (nothing else can
    /// write): the caller ends it in the same lock hold.
    func unpin(_ id: NodeID, _ held: borrowing DatabaseHeld) -> Bool {
        files.withLock { files in
            guard var file = files[id] else { return false }
            file.pins -= 1
            let unmark = file.marked && file.pins == 0 && file.writerCount == 0
            if unmark { file.marked = false }
            files[id] = file.isSettled ? nil : file
            return unmark
        }
    }

    /// What a commit must write: the live state if it changed, and whether
    /// the unfinished-write mark can go with it.
    struct Commit: Sendable {
        let snapshot: Snapshot?
        let unmark: Bool
        var isEmpty: Bool { snapshot == nil && !unmark }
    }

    /// The commit of a flush. The mark goes when the flushed handle is the
    /// only one open, since no other handle can write after it. Taken under the database lock; on a
    /// failed commit the caller calls `setMarked(id, true)` again.
    func flushing(_ id: NodeID, writable: Bool, _ held: borrowing DatabaseHeld) -> Commit {
        files.withLock { files in
            guard var file = files[id] else { return Commit(snapshot: nil, unmark: false) }
            // A direct writer's flush says nothing: the kernel sends FLUSH for
            // every close of a descriptor, including the copies a fork leaves
            // in a child that execs, and the handle may write on, unseen. So
            // its mark stays until release, which commits the state with it
            // (after a crash before that, recovery takes both from the data).
            guard file.directWriters.isEmpty else { return Commit(snapshot: nil, unmark: false) }
            Self.refresh(&file)
            let snapshot = file.snapshot
            let unmark = file.marked && writable && file.openCount == 1 && file.pins == 0 && file.writing == 0
            if unmark { file.marked = false }
            files[id] = file
            return Commit(snapshot: snapshot, unmark: unmark)
        }
    }

    /// The commit of an fsync: the live state, and the mark stays.
    func synchronizing(_ id: NodeID, _ held: borrowing DatabaseHeld) -> Commit {
        files.withLock { files in
            guard var file = files[id] else { return Commit(snapshot: nil, unmark: false) }
            Self.refresh(&file)
            files[id] = file
            return Commit(snapshot: file.snapshot, unmark: false)
        }
    }

    /// Drops one open and returns what must be committed with it: the live
    /// state if it changed, and the mark when the last writer goes. The
    /// caller commits before `forgetIfClosed`, so getattr never falls back to
    /// an older row.
    func closing(_ id: NodeID, writable: Bool, descriptor: Int32, _ held: borrowing DatabaseHeld) -> Commit {
        files.withLock { files in
            guard var file = files[id] else { return Commit(snapshot: nil, unmark: false) }
            Self.refresh(&file)
            file.directWriters.removeAll { $0 == descriptor }
            let snapshot = file.snapshot
            file.openCount -= 1
            if writable { file.writerCount -= 1 }
            let unmark = file.marked && file.writerCount == 0 && file.pins == 0
            if unmark { file.marked = false }
            files[id] = file
            return Commit(snapshot: snapshot, unmark: unmark)
        }
    }

    /// Removes the entry of a file nobody has open any more, once what it
    /// changed is committed (`LiveFile.isSettled`).
    func forgetIfClosed(_ id: NodeID, _ held: borrowing DatabaseHeld) {
        files.withLock { files in
            if let file = files[id], file.isSettled { files[id] = nil }
        }
    }

    /// Files whose last release did not commit (a full disk): what is left
    /// to commit for them is `settling`'s.
    func unsettled(_ held: borrowing DatabaseHeld) -> [NodeID] {
        let ids = files.withLock { files in files.compactMap { $1.openCount <= 0 && !$1.isSettled ? $0 : nil } }
        if ids.isEmpty { hasUnsettled.store(false, ordering: .relaxed) }
        return ids
    }

    /// The commit a failed last release still owes: the live state if it
    /// changed, and the mark when nothing can write any more. Nil while the
    /// file is open again (its next release owes it).
    func settling(_ id: NodeID, _ held: borrowing DatabaseHeld) -> Commit {
        files.withLock { files in
            guard var file = files[id], file.openCount <= 0 else { return Commit(snapshot: nil, unmark: false) }
            let unmark = file.marked && file.pins == 0
            if unmark { file.marked = false }
            files[id] = file
            return Commit(snapshot: file.snapshot, unmark: unmark)
        }
    }

    /// Records a write through the daemon's `descriptor` that ended at `end`
    /// (its mtime is taken in at the next read: `refresh`).
    func wrote(_ id: NodeID, endingAt end: Int64, through descriptor: Int32) {
        files.withLock { files in
            guard var file = files[id] else { return }
            file.attributes.size = max(file.attributes.size, end)
            file.unstampedWrite = descriptor
            file.dirty = true
            file.generation &+= 1
            files[id] = file
        }
    }

    /// `stored` with the live size and times of an open file laid over it.
    func overlay(_ stored: Attributes, _ held: borrowing DatabaseHeld) -> Attributes {
        // Directories are never open for writing: no lock, no array. Side
        // files are files like assets (written through passthrough too).
        guard stored.kind.hasData else { return stored }
        return overlay([stored], held)[0]
    }

    /// A directory listing's attributes, overlaid under one lock (a listing
    /// of 100,000 entries takes it once per batch, not once per entry).
    func overlay(_ listing: [Attributes], _ held: borrowing DatabaseHeld) -> [Attributes] {
        files.withLock { files in
            guard !files.isEmpty else { return listing }
            return listing.map { stored in
                guard stored.kind.hasData, var file = files[stored.id] else { return stored }
                if file.needsRefresh {
                    Self.refresh(&file)
                    files[stored.id] = file
                }
                let live = file.attributes
                var result = stored
                result.size = live.size
                result.modificationTime = live.modificationTime
                result.changeTime = live.changeTime
                return result
            }
        }
    }

    /// The last attributes of an open file whose row is gone (deleted while open).
    func lastKnown(_ id: NodeID, _ held: borrowing DatabaseHeld) -> Attributes? {
        files.withLock { files in
            guard var file = files[id], file.openCount > 0 else { return nil }
            Self.refresh(&file)
            files[id] = file
            var attributes = file.attributes
            attributes.linkCount = 0
            return attributes
        }
    }

    /// The daemon set the content file's mtime to the live one: not a change
    /// a direct writer made. The size seen stays, so a write that came
    /// meanwhile is still taken in.
    func dataStamped(_ id: NodeID, modified: Nanoseconds, _ held: borrowing DatabaseHeld) {
        files.withLock { files in
            guard let seen = files[id]?.contentSeen else { return }
            files[id]!.contentSeen = ContentStamp(size: seen.size, modified: modified)
        }
    }

    /// Takes a setattr's result as the live state (it was committed with it).
    func replace(with attributes: Attributes, _ held: borrowing DatabaseHeld) {
        files.withLock { files in
            files[attributes.id]?.attributes = attributes
            // Its times are later than the writes before it (it took them in).
            files[attributes.id]?.unstampedWrite = nil
        }
    }

    struct Snapshot: Sendable {
        let attributes: Attributes
        let generation: UInt64
    }

    func committed(_ snapshot: Snapshot, _ held: borrowing DatabaseHeld) {
        files.withLock { files in
            if let file = files[snapshot.attributes.id], file.generation == snapshot.generation {
                files[snapshot.attributes.id]!.dirty = false
            }
        }
    }
}
