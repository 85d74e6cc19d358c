#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization

/// Reads what each asset's content says about itself, in the background,
/// and records it (SEMANTICS.md § What albumfs knows of each asset): after
/// the last writer of an asset closes it, and at mount for every asset that
/// has no facts yet. One serial queue at utility priority, so a copy is
/// never slowed by more than one reader; each asset's facts are written
/// only if its content did not change while it was read (else it is read
/// again), up to 32 assets a transaction (fewer when the queue runs dry).
final class Indexer: Sendable {
    private let queue = DispatchQueue(label: "albumfs.indexer", qos: .utility)
    private let queued = Mutex<Set<NodeID>>([])
    /// Reads asked for and not finished (queued or under way).
    private let outstanding = Atomic<Int>(0)
    private let idle = DispatchGroup()
    private let reader: any AssetFactsReader

    init(reader: any AssetFactsReader) {
        self.reader = reader
    }

    /// Set at the end of a mount: what is still queued is left for the next one.
    private let stopped = Atomic<Bool>(false)

    /// Stops reading: queued reads are dropped (the next mount reads what has
    /// no facts), and the read under way, if any, is waited for (at most
    /// `timeout` seconds), so the library can close on its owner's thread.
    func stop(timeout seconds: Double) {
        stopped.store(true, ordering: .releasing)
        _ = idle.wait(timeout: .now() + seconds)
    }

    /// Reads `id` of `library` once the queue gets to it (queued once however
    /// often it is asked for before then). The library is not kept alive by it.
    func enqueue(_ id: NodeID, of library: Library) {
        guard queued.withLock({ $0.insert(id).inserted }) else { return }
        outstanding.add(1, ordering: .relaxed)
        queue.async(group: idle) { [self, weak library] in
            let waiting = queued.withLock { queued in
                queued.remove(id)
                return queued.count
            }
            guard !stopped.load(ordering: .relaxed), let library else { return drop(1) }
            readOne(id, of: library)
            // One transaction for many files: the requests a copy makes
            // meanwhile wait for the database less often.
            writeUnwritten(of: library, evenFew: waiting == 0)
        }
    }

    /// Facts read and not yet written (only the queue touches them).
    private let unwritten = Mutex<[Reading]>([])
    private static let batch = 32

    /// Reads one asset counted in `outstanding`; what it read waits in `unwritten`.
    private func readOne(_ id: NodeID, of library: Library) {
        switch read(id, in: library) {
        case .read(let reading): unwritten.withLock { $0.append(reading) }
        case .changedWhileRead: enqueue(id, of: library); outstanding.subtract(1, ordering: .relaxed)
        case .nothing: outstanding.subtract(1, ordering: .relaxed)
        }
    }

    /// Writes what waits in one transaction once there is a batch of it (or
    /// any of it, `evenFew`: nothing else is queued).
    private func writeUnwritten(of library: Library, evenFew: Bool) {
        let batch = unwritten.withLock { unwritten -> [Reading] in
            guard unwritten.count >= Self.batch || (evenFew && !unwritten.isEmpty) else { return [] }
            defer { unwritten = [] }
            return unwritten
        }
        guard !batch.isEmpty else { return }
        record(batch, in: library)
        outstanding.subtract(batch.count, ordering: .relaxed)
    }

    /// The mount is ending: `count` reads and what waits unwritten are not done.
    private func drop(_ count: Int) {
        outstanding.subtract(count + unwritten.withLock { unwritten in
            defer { unwritten = [] }
            return unwritten.count
        }, ordering: .relaxed)
    }

    /// Runs `body` (a writer's release) counted as pending, so that the count
    /// never drops to 0 between the writer's close and its read being queued.
    func announcing<T>(_ body: () throws(LibraryError) -> T) throws(LibraryError) -> T {
        outstanding.add(1, ordering: .relaxed)
        defer { outstanding.subtract(1, ordering: .relaxed) }
        return try body()
    }

    /// At mount: every asset with no facts (the backlog), read a batch at a
    /// time straight from the database. Nothing of the backlog is held but the
    /// batch under way, so a library of millions unread costs no memory for
    /// it; and each batch queues the next behind the reads that closes asked
    /// for meanwhile, so a photo copied in is read within one batch, not after
    /// the whole backlog.
    func indexMissing(of library: Library) {
        // Pending from now to the backlog's end: `index --wait` right after a mount waits for it.
        outstanding.add(1, ordering: .relaxed)
        queue.async(group: idle) { [self, weak library] in
            // The backlog ends at the highest id now: later assets are queued by their closes.
            guard let highest = try? library?.read(behindRequests: true, { db in try db.highestNodeID() }) else { return drop(1) }
            readBacklog(after: 0, through: highest, of: library)
        }
    }

    private func readBacklog(after: NodeID, through highest: NodeID, of library: Library?) {
        guard !stopped.load(ordering: .relaxed), let library else { return drop(1) }
        // A bounded range of ids a query: the database is held for
        // milliseconds, even where nearly every asset has its facts.
        let through = after + Self.backlogSpan
        guard let chunk = try? library.read(behindRequests: true, { db in
                  try db.assetsWithoutFacts(after: after, through: through, limit: Self.batch)
              }), !chunk.isEmpty || through < highest else {
            outstanding.subtract(1, ordering: .relaxed)
            return
        }
        // An asset a close queued is read there.
        for id in chunk where !queued.withLock({ $0.contains(id) }) {
            outstanding.add(1, ordering: .relaxed)
            readOne(id, of: library)
        }
        writeUnwritten(of: library, evenFew: true)
        let next = chunk.count == Self.batch ? chunk[chunk.count - 1] : through
        queue.async(group: idle) { [self, weak library] in readBacklog(after: next, through: highest, of: library) }
    }

    /// Ids a query of the backlog looks at.
    private static let backlogSpan: NodeID = 4096

    /// Assets waiting to be read or being read.
    var pending: Int { outstanding.load(ordering: .relaxed) }

    /// Returns when nothing is waiting (or after `timeout` seconds: false).
    func waitUntilIdle(timeout seconds: Double) -> Bool {
        idle.wait(timeout: .now() + seconds) == .success
    }

    struct Reading: Sendable {
        let id: NodeID
        let facts: AssetFacts
        let rollName: Name?
        let month: String
        let screenshot: Bool
        let stamp: (size: Int64, modified: Nanoseconds)
    }

    enum Outcome: Sendable {
        case read(Reading)
        /// Its content changed while it was read: read it again.
        case changedWhileRead
        /// Gone, not an asset, or unreadable: nothing to record.
        case nothing
    }

    private func read(_ id: NodeID, in library: Library) -> Outcome {
        guard let subject = try? library.read(behindRequests: true, { db -> (Attributes, Name?)? in
            guard let a = try db.attributes(of: id), a.kind == .asset else { return nil }
            return (a, try db.name(of: id, in: FixedNode.cameraRoll))
        }) else { return .nothing }
        guard let descriptor = try? library.content.open(id, writable: false) else { return .nothing }
        defer { close(descriptor) }
        guard let before = ContentStamp(descriptor: descriptor), let facts = try? reader.facts(ofFileAt: descriptor) else { return .nothing }
        guard ContentStamp(descriptor: descriptor) == before else {
            return .changedWhileRead
        }
        let (attributes, rollName) = subject
        return .read(Reading(id: id, facts: facts, rollName: rollName,
                             month: facts.capturedMonth ?? Self.localMonth(attributes.modificationTime),
                             screenshot: facts.isScreenshot || (facts.kind == .photo && rollName.map(ScreenshotNames.matches) == true),
                             stamp: (before.size, before.modified)))
    }

    /// Writes what was read, in one transaction.
    private func record(_ readings: [Reading], in library: Library) {
        let changes = try? library.write(behindRequests: true) { db -> ChangeSet in
            var changes = ChangeSet()
            // Stopped: the mount is ending and its store is about to be released
            // (Library.stopIndexing waits for a transaction under way).
            guard !stopped.load(ordering: .acquiring) else { return changes }
            // What the facts pair (SEMANTICS.md § Pairs), in the same transaction.
            var pairing = Mutation(db: db, now: library.options.now(), options: library.options, content: library.content,
                                   caller: Caller(uid: 0, gid: 0))
            for r in readings where try db.kind(of: r.id) == .asset {
                // What the views showed of it may go: the kernel must not keep those names.
                let liveRollName = try db.name(of: r.id, in: FixedNode.cameraRoll)
                let rollName = liveRollName ?? r.rollName
                if let rollName {
                    for entry in try ComputedViews.names(of: r.id, rollName: rollName, db) { changes.entry(entry.directory, entry.name) }
                }
                try db.setFacts(r.id, r.facts, month: r.month, screenshot: r.screenshot, stamp: r.stamp)
                try db.setThumbnail(r.id, r.facts.thumbnail)
                try pairing.pairIfPartnered(r.id, rollName: liveRollName, facts: r.facts)
            }
            changes.merge(pairing.changes)
            return changes
        }
        // Delivered under the lock: once the mount clears it, none is under way.
        if let changes, !changes.isEmpty { library.backgroundChanges.withLock { $0?(changes) } }
    }

    /// `YYYY-MM` of a time in the daemon's local time zone.
    static func localMonth(_ time: Nanoseconds) -> String {
        var seconds = time_t(time / 1_000_000_000)
        var parts = tm()
        localtime_r(&seconds, &parts)
        let year = Int(parts.tm_year) + 1900, month = Int(parts.tm_mon) + 1
        return "\(year)-\(month < 10 ? "0" : "")\(month)"
    }
}

extension Library {
    /// Returns once every asset closed so far has its facts (false after
    /// `timeout` seconds; true at once when nothing reads facts).
    public func waitForIndexing(timeout seconds: Double) -> Bool {
        indexer?.waitUntilIdle(timeout: seconds) ?? true
    }

    /// At the end of a mount: no more reading (see Indexer.stop), and no
    /// more facts written: a read still under way after `timeout` seconds (a
    /// huge file) finds the indexer stopped when it takes the database lock,
    /// and one that holds it now is over when this returns. So nothing is
    /// written after the store is released.
    public func stopIndexing(timeout: Double = 5) {
        guard let indexer else { return }
        indexer.stop(timeout: timeout)
        _ = try? read { _ in }
    }
}
