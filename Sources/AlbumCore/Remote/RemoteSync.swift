#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import SQLiteKit
import Synchronization

/// Uploads the queued originals and deletes the objects no asset needs, on a
/// thread of its own (SEMANTICS.md § Remote storage): one step at a time,
/// where a step uploads up to `concurrentUploads` small originals at once. Nothing
/// a request does waits for it. Each step is journaled in the database: an
/// upload is taken off the queue only after the bucket has the object, in a
/// transaction that also records it, so a crash anywhere repeats the step
/// (an object named by its content is never stored twice). Deletes and
/// uploads never run at once (a step is either): an object is deleted only while no asset
/// needs it, and one that becomes needed again leaves the deletes first.
///
/// A failure (unreachable, refused, the data changed while it was read) is
/// retried after a pause that doubles up to a minute (work queued meanwhile
/// does not cut it short), for as long as it takes; nothing is dropped.
///
/// While files are being written the worker waits for the writes to
/// settle: it starts nothing until none has been committed for `settle`
/// seconds (1), so that an import has the machine to itself (on two cores, the
/// uploads and the server taking them made `cp -r` of 300 photos 1.15 × as
/// long as into a local library). Not longer than `longestDeferral` (a
/// long import's photos do not wait for its end), and not at all while
/// someone waits for the uploads (`hurry`: `sync --wait`).
final class RemoteSync: Sendable {
    let backend: any ObjectBackend
    private let wakeUp = DispatchSemaphore(value: 0)
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    /// The last failure (Library.lastRemoteError; each new one is logged once), nil once a step works.
    let lastError = Mutex<String?>(nil)
    static let longestPause: Double = 60
    /// `LibraryOptions.uploadSettle`.
    let settle: Double
    static let longestDeferral: Double = 30
    /// When data was last committed (monotonic seconds).
    private let lastWrite = Mutex<Double>(0)
    /// Someone waits for the uploads: until the queue is empty, no settling.
    private let hurried = Atomic<Bool>(false)
    /// Someone waits for a snapshot: it is due at once.
    private let snapshotHurried = Atomic<Bool>(false)

    /// A second device's: no step ever writes to the bucket (only the cache bound runs).
    let mirror: Bool
    /// Until when listings fetch no thumbnail (monotonic seconds): one failed
    /// (Library.fetchThumbnails).
    let thumbnailFetchesPausedUntil = Mutex<Double>(0)

    init(backend: any ObjectBackend, settle: Double = 1, mirror: Bool = false) {
        self.backend = backend
        self.settle = settle
        self.mirror = mirror
    }

    /// Starts the worker for `library` (which it does not keep alive).
    func start(for library: Library) {
        // One long-running block on a queue of its own (a thread of its own
        // for the mount's life), at utility priority: background work.
        DispatchQueue(label: "albumfs.remote", qos: .utility).async { [self, weak library] in
            // Nice 10 on this thread: a copy into the mount comes first (on
            // two cores the uploads of what `cp -r` wrote took a third of its
            // CPU time), yet uploads never starve the way SCHED_IDLE could
            // on a machine that is never idle.
            setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)   // (Linux: 0 is this thread)
            defer { setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 0) }
            run { library }
            finished.signal()
        }
    }

    /// Something was queued: look now.
    func wake() { wakeUp.signal() }

    /// A file's written data is about to be committed: settling starts over.
    func noteWrite() {
        lastWrite.withLock { $0 = WaitableValue<Int>.now() }
    }

    /// Someone waits for a snapshot: take one as soon as the queue is empty.
    func hurrySnapshot() {
        if !snapshotHurried.exchange(true, ordering: .relaxed) { wakeUp.signal() }
    }

    /// Changes seen by the worker since the bucket's newest snapshot: the
    /// change count it last saw, when it saw it change, and when the first
    /// change not in a snapshot was seen (monotonic seconds).
    private struct ChangesSeen { var count: UInt64; var lastAt: Double; var firstAt: Double? }
    private let changesSeen = Mutex(ChangesSeen(count: 0, lastAt: 0, firstAt: nil))

    /// When the next snapshot is due (monotonic seconds; nil: none pending):
    /// `snapshotSettle` after the last change seen, `snapshotInterval`
    /// after the first, now when hurried. Changes are seen when the worker
    /// looks (at the latest every 30 s while idle).
    private func snapshotDue(_ library: Library) -> Double? {
        guard library.snapshotPending else {
            changesSeen.withLock { $0.firstAt = nil }
            return nil
        }
        let now = WaitableValue<Int>.now()
        let count = library.changeCount
        return changesSeen.withLock { seen in
            if seen.count != count || seen.firstAt == nil {
                seen.count = count
                seen.lastAt = now
                if seen.firstAt == nil { seen.firstAt = now }
            }
            if snapshotHurried.load(ordering: .relaxed) { return now }
            return min(seen.lastAt + library.options.snapshotSettle, seen.firstAt! + library.options.snapshotInterval)
        }
    }

    /// Someone waits for the queue to empty: start now.
    func hurry() {
        if !hurried.exchange(true, ordering: .relaxed) { wakeUp.signal() }
    }

    /// When the current deferral began (nil: none is under way).
    private let deferringSince = Mutex<Double?>(nil)

    /// When the next step may start, if not now (writes still settling).
    private func deferral() -> DispatchTime? {
        let now = WaitableValue<Int>.now()
        let quiet = lastWrite.withLock { $0 } + settle
        return deferringSince.withLock { since in
            guard quiet > now, !hurried.load(ordering: .relaxed) else {
                since = nil
                return nil
            }
            let began = since ?? now
            since = began
            let until = min(quiet, began + Self.longestDeferral)
            return until > now ? .now() + (until - now) : nil
        }
    }

    /// At the end of a mount: no step starts after this, and no step's result
    /// is written after it returns (a step still under way after `timeout`
    /// finds the worker stopped when it takes the database lock; what it did
    /// in the bucket is done again, idempotently, at the next mount).
    /// Whether the worker ended within `timeout`.
    @discardableResult
    func stop(timeout: Double) -> Bool {
        stopped.store(true, ordering: .releasing)
        wakeUp.signal()
        return finished.wait(timeout: .now() + timeout) == .success
    }

    var isStopped: Bool { stopped.load(ordering: .acquiring) }

    /// `library()`: the library while it lives (never kept alive by the
    /// worker, not even while it waits).
    private func run(_ library: () -> Library?) {
        var pause = 1.0
        // Whether the database may hold a failure for stats (an earlier mount's, at first).
        var failureRecorded = true
        while !isStopped {
            if let until = deferral() {
                try? library()?.pausePoints.reached(.uploadsSettling)
                _ = wakeUp.wait(timeout: until)
                while wakeUp.wait(timeout: .now()) == .success {}
                continue
            }
            guard let outcome = library().map({ library in
                let outcome = step(library)
                // The cache's bound, after every upload and when idle.
                if case .failed = outcome {} else { _ = try? library.evictOverCacheSize() }
                return outcome
            }) else { return }
            switch outcome {
            case .deferred:
                continue
            case .did, .idle:
                // Working again: the failure stats showed is over.
                lastError.withLock { $0 = nil }
                if failureRecorded {
                    try? record(library()) { db in try db.setRemoteError(nil) }
                    failureRecorded = false
                }
                if case .did = outcome {
                    pause = 1
                    continue
                }
                // The queue is empty: whoever hurried it is served.
                hurried.store(false, ordering: .relaxed)
                // Until the next snapshot is due, 30 s at most (to see changes).
                var idle = 30.0
                if let library = library(), let due = snapshotDue(library) {
                    idle = max(0, min(idle, due - WaitableValue<Int>.now()))
                }
                _ = wakeUp.wait(timeout: .now() + idle)
                // One look answers every wake-up so far (an import signals once a file).
                while wakeUp.wait(timeout: .now()) == .success {}
            case .failed(let why):
                let first = lastError.withLock { last in defer { last = why }; return last != why }
                if first {
                    library()?.options.log("remote: \(why) (retrying, at most every \(Int(Self.longestPause)) s)")
                    try? record(library()) { db in try db.setRemoteError(why) }
                    failureRecorded = true
                }
                // The whole pause, whatever is queued meanwhile: an import
                // wakes the worker once a file, and each wake-up taken as a
                // retry would spend the backoff in a burst of failures.
                let until = DispatchTime.now() + pause
                while !isStopped, wakeUp.wait(timeout: until) == .success {}
                pause = min(pause * 2, Self.longestPause)
            }
        }
    }

    enum Outcome { case did, idle, deferred, failed(String) }

    /// One delete owed (an object, else a companion), else one upload
    /// queued, else the metadata's snapshot if it is due, else thumbnails
    /// to store beside their objects.
    private func step(_ library: Library) -> Outcome {
        if mirror { return .idle }
        // One writer: nothing goes to the bucket without the lease.
        if let why = library.leaseWhy() { return .failed(why) }
        do {
            if let sha256 = try library.read(behindRequests: true, { db in try db.nextRemoteDelete() }) {
                return try delete(sha256, library)
            }
            if let asset = try library.read(behindRequests: true, { db in try db.nextCompanionDelete() }) {
                try backend.remove(Companion.key(of: asset))
                try record(library) { db in try db.companionDeleteDone(asset) }
                return .did
            }
            let queued = try library.read(behindRequests: true, { db in try db.nextUploads(limit: Self.concurrentUploads) })
            if let (asset, ticket, size) = queued.first {
                // A write noted after the look before this step (it is noted
                // before the commit that queued what was just read): settle first.
                if deferral() != nil { return .deferred }
                // Small originals go a few at once (each a PUT and its
                // companion's: the round trips, not the bytes, are their cost);
                // a large one alone, on its own (its parts are the parallelism).
                let batch = queued.prefix { $0.size <= Self.concurrentUploadLimit }
                guard batch.count > 1, size <= Self.concurrentUploadLimit else { return try upload(asset, ticket: ticket, library) }
                return uploadAtOnce(Array(batch), library)
            }
            if let due = snapshotDue(library), due <= WaitableValue<Int>.now() {
                if deferral() != nil { return .deferred }
                try library.takeSnapshot(backend)
                snapshotHurried.store(false, ordering: .relaxed)
                return .did
            }
            // Last, the thumbnails other devices browse by (after the snapshot: `sync --wait` is not theirs to wait for).
            let thumbnails = try library.read(behindRequests: true, { db in try db.thumbnailsToStore(limit: Self.thumbnailsAtOnce) })
            guard !thumbnails.isEmpty else { return .idle }
            if deferral() != nil { return .deferred }
            return storeThumbnails(thumbnails, library)
        } catch {
            return .failed("\(error)")
        }
    }

    /// How many small originals go up at once, and what is small (the
    /// multipart threshold of the S3 backend: below it, one PUT each).
    static let concurrentUploads = 4
    static let concurrentUploadLimit: Int64 = 64 << 20
    let uploadLanes = (0..<RemoteSync.concurrentUploads).map { DispatchQueue(label: "albumfs.upload.\($0)", qos: .utility) }

    /// Uploads `batch` at once, each as `upload` does (its own journal
    /// records); done when all are, failed with the first failure.
    private func uploadAtOnce(_ batch: [(asset: NodeID, ticket: Int64, size: Int64)], _ library: Library) -> Outcome {
        onUploadLanes(batch) { [self] item in try upload(item.asset, ticket: item.ticket, library) }
    }

    /// Runs `body` for each of `items` at once on the upload lanes (a serial
    /// queue each: a thread each while it runs, whatever the number of
    /// cores: they wait on the network, not the CPU), at the worker's
    /// background priority; done when all are, failed with the first failure.
    func onUploadLanes<Item: Sendable>(_ items: [Item], _ body: @escaping @Sendable (Item) throws -> Outcome) -> Outcome {
        let failures = Mutex<[String]>([])
        let group = DispatchGroup()
        for (index, item) in items.enumerated() {
            uploadLanes[index % uploadLanes.count].async(group: group) {
                // Background work, as the worker's own thread is (start).
                setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
                defer { setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 0) }
                let outcome: Outcome
                do {
                    outcome = try body(item)
                } catch {
                    outcome = .failed("\(error)")
                }
                if case .failed(let why) = outcome { failures.withLock { $0.append(why) } }
            }
        }
        group.wait()
        return failures.withLock { $0.first }.map { .failed($0) } ?? .did
    }

    private func delete(_ sha256: String, _ library: Library) throws -> Outcome {
        if try !library.read(behindRequests: true, { db in try db.isObjectNeeded(sha256) }) {
            try backend.remove(sha256: sha256)
            // Its thumbnail goes with it (none there: fine).
            try backend.remove(ThumbnailObjects.key(of: sha256))
        }
        try record(library) { db in
            // Needed again meanwhile (an upload of the same content): its
            // record took it off the deletes already; else it is done.
            if try !db.isObjectNeeded(sha256) { try db.remoteDeleteDone(sha256) }
        }
        return .did
    }

    private func upload(_ asset: NodeID, ticket: Int64, _ library: Library) throws -> Outcome {
        guard let descriptor = try? library.content.open(asset, writable: false) else {
            // Gone (purged meanwhile), or its data is missing (fsck names it):
            // nothing to upload, and it must not hold up the queue behind it.
            var missing = false
            try record(library) { db in
                missing = try db.kind(of: asset) != nil
                try db.uploadDone(asset, ticket: ticket)
            }
            return missing ? .failed("asset \(asset) has no local data to upload (albumfs fsck names it); taken off the queue") : .did
        }
        defer { close(descriptor) }
        guard let before = ContentStamp(descriptor: descriptor) else { return .failed("asset \(asset): cannot stat its data") }
        let digest = try ObjectDigest.of(descriptor, length: before.size)
        // Journaled before the PUT: whatever ends this upload but its record
        // (a purge, a change, a crash and a purge) owes the object a delete.
        var begun = false
        try record(library) { db in
            // Purged meanwhile (its purge took it off the queue, as below).
            guard try db.kind(of: asset) != nil else { return try db.uploadDone(asset, ticket: ticket) }
            try db.beginUpload(asset, sha256: digest.sha256)
            begun = true
        }
        guard begun else { return .did }
        let etag = try backend.store(descriptor, length: before.size, sha256: digest.sha256)
        guard ContentStamp(descriptor: descriptor) == before else {
            try record(library) { db in try db.endUploads(of: asset) }
            return .failed("asset \(asset) changed while it was uploaded")
        }
        // Its companion, before the upload is recorded: a recovery finds it
        // even if no snapshot ever holds the record (none for an asset
        // deleted meanwhile: a recovery leaves it deleted).
        let uploaded = Int(library.options.now() / 1_000_000_000)
        if let companion = try library.read(behindRequests: true, { db in try Companion.of(asset, digest, modified: before.modified, uploaded: uploaded, db) }) {
            try backend.put(Companion.key(of: asset), bytes: companion.encoded())
        }
        try record(library) { db in
            // Only what the row still says: a write since then queued it again.
            if let row = try db.attributes(of: asset), row.size == before.size, try !db.isBeingWritten(asset) {
                try db.setRemoteObject(asset, digest, etag: etag, modified: before.modified)
                try db.uploadDone(asset, ticket: ticket)
            }
            try db.endUploads(of: asset)
        }
        return .did
    }

    /// Writes a step's result, unless the worker was stopped (the store may be
    /// released as soon as `stop` returns).
    func record(_ library: Library?, _ body: (Database) throws -> Void) throws {
        try library?.write(behindRequests: true) { db in
            guard !isStopped else { return }
            try body(db)
        }
    }
}
