import Synchronization

/// The size and times of assets that are open for writing, kept in memory so
/// writes need no database work. `flush` commits them.
///
/// Why this exists: `close()` returns before the kernel's RELEASE reaches the
/// daemon, so getattr and setattr must see the newest size and times at once,
/// and a late release must never overwrite a newer setattr. Both read and
/// update this one table.
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
    }

    private let files = Mutex<[NodeID: LiveFile]>([:])

    func opened(_ attributes: Attributes, writable: Bool) {
        files.withLock { files in
            var file = files[attributes.id] ?? LiveFile(openCount: 0, writerCount: 0, attributes: attributes)
            file.openCount += 1
            if writable { file.writerCount += 1 }
            files[attributes.id] = file
        }
    }

    func isMarked(_ id: NodeID) -> Bool {
        files.withLock { files in files[id]?.marked ?? false }
    }

    func setMarked(_ id: NodeID, _ marked: Bool) {
        files.withLock { files in files[id]?.marked = marked }
    }

    /// What a commit must write: the live state if it changed, and whether
    /// the unfinished-write mark can go with it.
    struct Commit: Sendable {
        let snapshot: Snapshot?
        let unmark: Bool
        var isEmpty: Bool { snapshot == nil && !unmark }
    }

    /// The commit of a flush. The mark goes when `handleCount` handles are
    /// all that is open (a flush: the one handle being flushed), since no
    /// other handle can write after it. Taken under the database lock; on a
    /// failed commit the caller calls `setMarked(id, true)` again.
    func flushing(_ id: NodeID, writable: Bool) -> Commit {
        files.withLock { files in
            guard var file = files[id] else { return Commit(snapshot: nil, unmark: false) }
            let snapshot = file.dirty ? Snapshot(attributes: file.attributes, generation: file.generation) : nil
            let unmark = file.marked && writable && file.openCount == 1
            if unmark { file.marked = false }
            files[id] = file
            return Commit(snapshot: snapshot, unmark: unmark)
        }
    }

    /// Drops one open and returns what must be committed with it: the live
    /// state if it changed, and the mark when the last writer goes. The
    /// caller commits before `forgetIfClosed`, so getattr never falls back to
    /// an older row.
    func closing(_ id: NodeID, writable: Bool) -> Commit {
        files.withLock { files in
            guard var file = files[id] else { return Commit(snapshot: nil, unmark: false) }
            let snapshot = file.dirty ? Snapshot(attributes: file.attributes, generation: file.generation) : nil
            file.openCount -= 1
            if writable { file.writerCount -= 1 }
            let unmark = file.marked && file.writerCount == 0
            if unmark { file.marked = false }
            files[id] = file
            return Commit(snapshot: snapshot, unmark: unmark)
        }
    }

    /// Removes the entry of a file nobody has open any more.
    func forgetIfClosed(_ id: NodeID) {
        files.withLock { files in
            if let file = files[id], file.openCount <= 0 { files[id] = nil }
        }
    }

    /// Records a write of `count` bytes at `offset`.
    func wrote(_ id: NodeID, endingAt end: Int64, now: Nanoseconds) {
        files.withLock { files in
            guard var file = files[id] else { return }
            file.attributes.size = max(file.attributes.size, end)
            file.attributes.modificationTime = now
            file.attributes.changeTime = now
            file.dirty = true
            file.generation &+= 1
            files[id] = file
        }
    }

    /// `stored` with the live size and times of an open file laid over it.
    func overlay(_ stored: Attributes) -> Attributes {
        overlay([stored])[0]
    }

    /// A directory listing's attributes, overlaid under one lock (a listing
    /// of 100,000 entries takes it once per batch, not once per entry).
    func overlay(_ listing: [Attributes]) -> [Attributes] {
        files.withLock { files in
            guard !files.isEmpty else { return listing }
            return listing.map { stored in
                guard stored.kind == .asset, let live = files[stored.id]?.attributes else { return stored }
                var result = stored
                result.size = live.size
                result.modificationTime = live.modificationTime
                result.changeTime = live.changeTime
                return result
            }
        }
    }

    /// The last attributes of an open file whose row is gone (deleted while open).
    func lastKnown(_ id: NodeID) -> Attributes? {
        files.withLock { files in
            guard var attributes = files[id]?.attributes else { return nil }
            attributes.linkCount = 0
            return attributes
        }
    }

    /// Takes a setattr's result as the live state (it was committed with it).
    func replace(with attributes: Attributes) {
        files.withLock { files in
            files[attributes.id]?.attributes = attributes
        }
    }

    struct Snapshot: Sendable {
        let attributes: Attributes
        let generation: UInt64
    }

    func committed(_ snapshot: Snapshot) {
        files.withLock { files in
            if let file = files[snapshot.attributes.id], file.generation == snapshot.generation {
                files[snapshot.attributes.id]!.dirty = false
            }
        }
    }
}
