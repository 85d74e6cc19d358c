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

    func hasWriter(_ id: NodeID) -> Bool {
        files.withLock { files in (files[id]?.writerCount ?? 0) > 0 }
    }

    /// Drops one open. Returns the state left to commit (if any) and whether
    /// this was the last writer. The caller commits before dropping the entry
    /// (`forget`), so getattr never falls back to an older row.
    func closing(_ id: NodeID, writable: Bool) -> (snapshot: Snapshot?, lastWriter: Bool) {
        files.withLock { files in
            guard var file = files[id] else { return (nil, false) }
            let snapshot = file.dirty ? Snapshot(attributes: file.attributes, generation: file.generation) : nil
            file.openCount -= 1
            if writable { file.writerCount -= 1 }
            files[id] = file
            return (snapshot, writable && file.writerCount == 0)
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
        guard stored.kind == .asset else { return stored }
        return files.withLock { files in
            guard let live = files[stored.id]?.attributes else { return stored }
            var result = stored
            result.size = live.size
            result.modificationTime = live.modificationTime
            result.changeTime = live.changeTime
            return result
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

    /// The state to commit, if anything changed since the last commit.
    func dirtySnapshot(_ id: NodeID) -> Snapshot? {
        files.withLock { files in
            guard let file = files[id], file.dirty else { return nil }
            return Snapshot(attributes: file.attributes, generation: file.generation)
        }
    }

    func committed(_ snapshot: Snapshot) {
        files.withLock { files in
            if let file = files[snapshot.attributes.id], file.generation == snapshot.generation {
                files[snapshot.attributes.id]!.dirty = false
            }
        }
    }
}
