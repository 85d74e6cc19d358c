#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Digests
import Synchronization

/// An evicted asset's data on its way back from the bucket into its fetch
/// file (`content/.transfers/fetch-ID`), a run of chunks (one ranged GET)
/// at a time (SEMANTICS.md § Remote storage, "Reading a remote-only
/// original"): first from the chunk readers wait for, else on from the last
/// one asked for (read-ahead), else from the first still missing. Each
/// chunk is checked against its recorded SHA-256 as its last byte arrives,
/// and only then counts as landed, so whatever has landed in the file may
/// be read. An object recorded without chunk
/// digests is fetched in order and checked whole: none of it may be read
/// until all of it came and matched. Once all is there the file is synced
/// and becomes the asset's content file (`finish`), if the asset is still
/// evicted then.
///
/// Readers wait for their bytes; a wait ends in an error when the download
/// failed, or when no chunk has come for `timeout` seconds (the mount's
/// `remote_timeout`). A failed download is forgotten: the next open starts
/// another.
final class Download: Sendable {
    let id: NodeID
    let digest: ObjectDigest
    /// The fetch file, read-write; the worker closes it when it ends.
    let descriptor: Int32
    /// The data's mtime, given to the fetch file before it is installed.
    let modified: Nanoseconds
    let timeout: Double
    private let state: WaitableValue<State>

    /// `discarded`: every chunk came and was checked, and the data was not
    /// kept (an original larger than `cache_size`, which no handle writes
    /// and nobody pinned): open handles read on, the next open fetches again.
    enum Outcome: Equatable, Sendable { case installed, discarded, failed(String) }

    private struct State {
        var landed: [Bool]
        /// Chunks a fetcher has taken (on their way or landed): never taken twice.
        var taken: [Bool]
        var landedBytes: Int64 = 0
        /// Chunks readers wait for, the oldest first.
        var wanted: [Int] = []
        /// Where read-ahead goes on: after the last chunk asked for or fetched.
        var nextInOrder = 0
        var outcome: Outcome?
        /// When the last chunk came (or the download began), monotonic seconds.
        var lastProgress: Double

        var isAllLanded: Bool { !landed.contains(false) }

        /// The next chunk to fetch and the ones after it that nobody took,
        /// at most `length` in all; a chunk a reader waits for alone (a
        /// larger GET is slower to start: a first 4 KiB waited 31–59 ms in
        /// GETs of 32 MiB, 22–28 ms in GETs of one chunk), and the first
        /// runs of a download short, then doubling.
        mutating func takeRun(inOrderOnly: Bool, length: Int) -> Range<Int>? {
            guard let (first, wantedNow) = next(inOrderOnly: inOrderOnly) else { return nil }
            let length = wantedNow ? 1 : min(length, max(1, taken.count(where: { $0 })))
            var end = first + 1
            while end < taken.count, end - first < length, !taken[end] { end += 1 }
            for index in first..<end { taken[index] = true }
            nextInOrder = max(nextInOrder, end)
            return first..<end
        }

        /// The chunk to fetch next, and whether a reader waits for it.
        private mutating func next(inOrderOnly: Bool) -> (Int, wanted: Bool)? {
            if !inOrderOnly, let index = wanted.first(where: { !taken[$0] }) {
                wanted.removeAll { $0 == index }
                nextInOrder = index + 1
                return (index, true)
            }
            wanted.removeAll { taken[$0] }
            if nextInOrder < taken.count, !taken[nextInOrder] {
                defer { nextInOrder += 1 }
                return (nextInOrder, false)
            }
            // Checked whole, nothing counts as landed before the end: the
            // pass in order is the only one.
            if inOrderOnly { return nil }
            return taken.firstIndex(of: false).map { index in nextInOrder = index + 1; return (index, false) }
        }
    }

    init(id: NodeID, digest: ObjectDigest, descriptor: Int32, modified: Nanoseconds, timeout: Double) {
        (self.id, self.digest, self.descriptor, self.modified, self.timeout) = (id, digest, descriptor, modified, timeout)
        state = WaitableValue(State(landed: Array(repeating: false, count: digest.chunkCount),
                                    taken: Array(repeating: false, count: digest.chunkCount),
                                    lastProgress: WaitableValue<State>.now()))
    }

    // MARK: readers

    /// Waits until bytes `range` (cut to the object's size) have come and
    /// been checked.
    func waitFor(_ range: Range<Int64>) throws(LibraryError) {
        let clamped = min(range.lowerBound, digest.size)..<min(range.upperBound, digest.size)
        guard !clamped.isEmpty else { return }
        let chunks = Int(clamped.lowerBound / ObjectDigest.chunkSize)...Int((clamped.upperBound - 1) / ObjectDigest.chunkSize)
        try wait { state in
            if chunks.allSatisfy({ state.landed[$0] }) { return true }
            for index in chunks where !state.landed[index] && !state.wanted.contains(index) { state.wanted.append(index) }
            return nil
        }
    }

    /// Waits until the whole object is the asset's data again.
    func waitForInstall() throws(LibraryError) {
        try wait { state in
            if state.outcome == .discarded { state.outcome = .failed("asset \(id): its data was not kept (larger than cache_size)") }
            return state.outcome == .installed ? true : nil
        }
    }

    /// Waits until the download ended, however it ended (or nothing came
    /// for `timeout`).
    func waitForEnd() {
        _ = state.wait(deadline: { max(WaitableValue<State>.now(), $0.lastProgress) + self.timeout }) { state -> Bool? in
            state.outcome != nil ? true : nil
        }
    }

    private func wait(_ ready: (inout State) -> Bool?) throws(LibraryError) {
        let timeout = self.timeout
        let started = WaitableValue<State>.now()
        // Nothing came for `timeout` since this wait began, or since the last chunk.
        let answer = state.wait(deadline: { max(started, $0.lastProgress) + timeout }) { state -> Result<Void, LibraryError>? in
            if ready(&state) != nil { return .success(()) }
            if case .failed(let why) = state.outcome { return .failure(.unavailable(why)) }
            return nil
        }
        switch answer {
        case .success: return
        case .failure(let error): throw error
        case nil:
            throw .remote("asset \(id): nothing came from the bucket for \(Self.seconds(timeout)) (remote_timeout)")
        }
    }

    /// Bytes checked so far (`user.albumfs.progress`), of the whole.
    var progress: (landed: Int64, total: Int64) { state.withLock { ($0.landedBytes, digest.size) } }

    var outcome: Outcome? { state.withLock { $0.outcome } }

    // MARK: the worker

    /// Fetches every chunk through `backend`, then `finish` makes the file the
    /// asset's (under the database lock; it throws when the mount is ending),
    /// unless `keeps` (asked once all came, before the file is synced) says
    /// the data is not to be kept: it has then let go of the file itself.
    /// Stops at `isStopped`; `failed` hears why it did not end installed.
    /// Runs on a queue of its own; closes the fetch file when done.
    /// `ended`: last of all, once nothing of the worker runs any more.
    func run(_ backend: any ObjectBackend, isStopped: @escaping @Sendable () -> Bool,
             ended: @escaping @Sendable () -> Void = {},
             keeps: @escaping @Sendable (Download) -> Bool = { _ in true },
             finish: @escaping @Sendable (Download) throws(LibraryError) -> Void,
             failed: @escaping @Sendable (Download, String) -> Void) {
        DispatchQueue(label: "albumfs.download", qos: .userInitiated).async { [self] in
            defer { ended() }
            let outcome = fetchAll(backend, isStopped: isStopped, keeps: keeps, finish: finish)
            close(descriptor)
            // Said (logged) before any reader hears of it.
            if case .failed(let why) = outcome { failed(self, why) }
            state.withLock { $0.outcome = outcome }
        }
    }

    /// How many runs are fetched at once: while one is hashed and written
    /// the others are on their way (one chunk at a time, a cold read of a
    /// remote-only 512 MiB video came at 0.28 of a plain GET's speed).
    static let fetchesAtOnce = 3

    /// Chunks a GET asks for at most (32 MiB). Each request costs the store:
    /// 512 MiB in GETs of 4 MiB took radosgw 0.91 s of CPU, in GETs of 16
    /// MiB 0.67 s, of 64 MiB 0.60 s, in one 0.58 s. A reader's seek into a
    /// run on its way waits for the run's chunks before it.
    static let chunksPerGet = 8

    private func fetchAll(_ backend: any ObjectBackend, isStopped: @Sendable () -> Bool,
                          keeps: (Download) -> Bool, finish: (Download) throws(LibraryError) -> Void) -> Outcome {
        let checkedWhole = digest.chunkCount > 0 && digest.digest(ofChunk: 0) == nil
        // Checked whole: the object's SHA-256, once the one fetcher has hashed it all.
        let wholeDigest = Mutex<String?>(nil)
        // The first failure of any fetcher; the others stop at their next run.
        let failure = Mutex<String?>(nil)
        // Checked whole: one pass in order (the hash runs over the chunks in turn).
        let fetchers = checkedWhole ? 1 : min(Self.fetchesAtOnce, max(1, digest.chunkCount))
        DispatchQueue.concurrentPerform(iterations: fetchers) { _ in
            let whole = checkedWhole ? SHA256() : nil
            do {
                while failure.withLock({ $0 == nil }),
                      let run = state.withLock({ $0.takeRun(inOrderOnly: checkedWhole, length: Self.chunksPerGet) }) {
                    if isStopped() { throw LibraryError.remote("asset \(id): the mount ended before its data came from the bucket") }
                    try fetch(run, backend, hashingWholeInto: whole, isStopped: isStopped)
                }
                if let whole {
                    let hex = whole.finish()
                    wholeDigest.withLock { $0 = hex }
                }
            } catch {
                let why = (error as? LibraryError)?.diagnostic ?? "asset \(id): \(error)"
                failure.withLock { if $0 == nil { $0 = why } }
            }
        }
        if let why = failure.withLock({ $0 }) { return .failed(why) }
        do {
            if checkedWhole {
                let actual = wholeDigest.withLock { $0 } ?? ""
                guard actual == digest.sha256 else {
                    throw LibraryError.remote("asset \(id): the bucket's object \(digest.sha256) holds other data (SHA-256 \(actual))")
                }
                state.withLock { state in
                    state.landed = Array(repeating: true, count: state.landed.count)
                    state.landedBytes = digest.size
                }
            }
            // Not kept: no sync of data about to be dropped.
            guard keeps(self) else { return .discarded }
            guard fsync(descriptor) == 0 else { throw LibraryError(errno: errno) }
            try ContentStore.setModificationTime(of: descriptor, to: modified)
            try finish(self)
            return .installed
        } catch let error as LibraryError {
            return .failed(error.diagnostic ?? "asset \(id): \(error)")
        } catch {
            return .failed("asset \(id): \(error)")
        }
    }

    /// Chunks `run` in one GET, straight into their place in the fetch file,
    /// each hashed on the way and landed (readable) once it matched; checked
    /// whole (no chunk digests), into `whole` (nothing lands before the end).
    private func fetch(_ run: Range<Int>, _ backend: any ObjectBackend, hashingWholeInto whole: SHA256?,
                       isStopped: () -> Bool) throws(LibraryError) {
        let range = digest.range(ofChunk: run.lowerBound).lowerBound..<digest.range(ofChunk: run.upperBound - 1).upperBound
        var index = run.lowerBound
        var filled: Int64 = 0
        var hasher = SHA256()
        // Why this side stopped the transfer, if it did.
        var stopped: LibraryError?
        let count: Int64
        do {
            count = try backend.fetch(sha256: digest.sha256, range: range, into: descriptor) { piece in
                var rest = piece
                while !rest.isEmpty {
                    let chunk = self.digest.range(ofChunk: index)
                    let part = UnsafeRawBufferPointer(rebasing: rest.prefix(Int(Int64(chunk.count) - filled)))
                    rest = UnsafeRawBufferPointer(rebasing: rest.dropFirst(part.count))
                    (whole ?? hasher).update(part)
                    filled += Int64(part.count)
                    guard filled == Int64(chunk.count) else { continue }
                    if let expected = self.digest.digest(ofChunk: index) {
                        guard hasher.finishBytes()[...] == expected else {
                            stopped = .remote("asset \(self.id): the bucket's object \(self.digest.sha256) holds other data "
                                              + "than the library recorded (bytes \(chunk.lowerBound)–\(chunk.upperBound))")
                            return false
                        }
                        hasher = SHA256()
                    }
                    self.arrived(index, checkedWhole: whole != nil)
                    (index, filled) = (index + 1, 0)
                    if index < run.upperBound, isStopped() {
                        stopped = .remote("asset \(self.id): the mount ended before its data came from the bucket")
                        return false
                    }
                }
                return true
            }
        } catch let error as LibraryError {
            throw stopped ?? error
        } catch {
            throw stopped ?? LibraryError.remote("asset \(id): its data is only in the bucket and cannot be had: \(error)")
        }
        if let stopped { throw stopped }
        guard count == range.count else {
            throw LibraryError.remote("asset \(id): the bucket's object \(digest.sha256) is shorter than the library recorded "
                                      + "(\(count) bytes at \(range.lowerBound), not \(range.count))")
        }
    }

    /// Chunk `index` came (and matched, if it has a digest of its own): it
    /// may be read, unless the object is checked whole.
    private func arrived(_ index: Int, checkedWhole: Bool) {
        state.withLock { state in
            state.lastProgress = WaitableValue<State>.now()
            if !checkedWhole {
                state.landed[index] = true
                state.landedBytes += Int64(digest.range(ofChunk: index).count)
            }
        }
    }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }
}
