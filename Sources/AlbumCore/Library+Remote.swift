#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import SQLiteKit

/// The store's remote (SEMANTICS.md § Remote storage), from the library's side.
extension Library {
    /// Gives the store a remote (`albumfs init --remote`): from now on every
    /// write that ends queues its asset's data; `everyAsset`: the assets
    /// already here are queued too.
    public func setRemote(_ remote: RemoteConfiguration, everyAsset: Bool) throws(LibraryError) {
        try write { db in
            try db.setRemoteConfiguration(remote)
            if everyAsset { try db.queueEveryAsset() }
        }
    }

    /// Starts uploading through `backend` (the mount, for a store with a remote).
    /// With `lease`, nothing is written to the bucket while it is not held.
    /// `mirror`: a second device's cache (Mirror.swift): originals come from
    /// the bucket and the cache is bounded, and nothing is ever written to it.
    public func startRemoteSync(_ backend: any ObjectBackend, lease: Lease? = nil, mirror: Bool = false) {
        guard remote != nil, !isReadOnly else { return }
        self.lease.withLock { $0 = lease }
        let sync = RemoteSync(backend: backend, settle: options.uploadSettle, mirror: mirror)
        remoteSync.withLock { $0 = sync }
        sync.start(for: self)
    }

    /// At the end of a mount: no upload or delete is recorded after this
    /// returns (what is left resumes at the next mount).
    /// The downloads under way stop at their next chunk, and are waited for
    /// within the same `timeout`: none is left fetching into a library that
    /// is gone, or into a process that is exiting (a fetcher hashing in
    /// libcrypto while exit's handlers tore it down crashed the daemon at an
    /// unmount; the daemon also ends with _exit, for one still stalled).
    public func stopRemoteSync(timeout: Double = 5) {
        guard let sync = remoteSync.withLock({ $0 }) else { return }
        let deadline = DispatchTime.now() + timeout
        let workerEnded = sync.stop(timeout: timeout)
        try? pausePoints.reached(.remoteSyncStopped)
        if downloadWorkers.wait(timeout: deadline) == .timedOut {
            options.log("remote: downloads still under way at the end of the mount (they are fetched again when read)")
        }
        // The worker's step may be a snapshot itself: only once it ended;
        // and within the same bound (an unreachable store must not hold the
        // unmount: the PUT left behind is whole or nothing, and the next
        // mount takes a snapshot).
        if workerEnded, leaseWhy() == nil, !sync.mirror {
            let done = DispatchSemaphore(value: 0)
            let backend = sync.backend
            DispatchQueue.global(qos: .utility).async { [self] in
                takeLastSnapshot(backend)
                done.signal()
            }
            if done.wait(timeout: deadline) == .timedOut {
                options.log("remote: the last snapshot of the metadata did not finish within \(Int(timeout)) s (the next mount takes one)")
            }
        }
        _ = try? read { _ in }
    }

    /// Nil when the bucket may be written to (the lease held, or none asked
    /// for); else why not.
    func leaseWhy() -> String? {
        lease.withLock { $0 }?.mayWrite()
    }

    /// A write ended somewhere: the uploader looks at its queue.
    func wakeRemoteSync() {
        remoteSync.withLock { $0 }?.wake()
    }

    /// How many assets wait to be uploaded (the root's `user.albumfs.uploading`).
    public func uploadsQueued() throws(LibraryError) -> Int64 {
        try read { db in try db.uploadsQueued() }
    }

    /// `user.albumfs.storage`: where an asset's data is (nil: no remote).
    func storage(of id: NodeID) throws(LibraryError) -> String? {
        guard remote != nil else { return nil }
        return try read { db -> String? in
            if downloads.withLock({ $0[id] }) != nil { return "downloading" }
            guard let row = try db.attributes(of: id), row.kind == .asset else { return nil }
            if try db.isQueuedForUpload(id) || db.isBeingWritten(id) { return "uploading" }
            if try db.isEvicted(id) { return "remote" }
            if let object = try db.remoteObject(of: id), object.digest.size == row.size, object.modified == row.modificationTime {
                return "both"
            }
            return "local"
        }
    }

    /// The last failure of the uploader, if its last step failed.
    public var lastRemoteError: String? {
        remoteSync.withLock { $0 }?.lastError.withLock { $0 }
    }
}

/// Originals kept only in the bucket (`-o cache_size`): eviction and fetching.
extension Library {
    /// The download of asset `id` if its data is only in the bucket: the
    /// one under way, else one started now; nil when the data is local.
    /// Looked up and started under the database lock, where a download's
    /// end takes it out of `downloads`: an open never misses the end of one.
    /// `reading`: with a read-only descriptor of its fetch file, opened in
    /// the same lock hold (the file is then the download's, or the asset's
    /// once installed: the same inode).
    func download(of id: NodeID, reading: Bool = false) throws(LibraryError) -> (download: Download, descriptor: Int32?)? {
        guard remote != nil else { return nil }
        let (downloads, content, timeout) = (self.downloads, self.content, options.remoteTimeout)
        let backend = remoteSync.withLock({ $0 })?.backend
        return try read { db -> (Download, Int32?)? in
            guard try db.isEvicted(id) else { return nil }
            let download: Download
            if let running = downloads.withLock({ $0[id] }) {
                download = running
            } else {
                guard let backend else {
                    throw LibraryError.remote("asset \(id) is only in the bucket, and this mount does not reach it (a read-only mount fetches nothing)")
                }
                guard let object = try db.remoteObject(of: id) else { throw LibraryError.inconsistent("evicted asset \(id) has no object on record") }
                download = Download(id: id, digest: object.digest, descriptor: try content.createFetchFile(id),
                                    modified: object.modified, timeout: timeout)
                downloads.withLock { $0[id] = download }
                start(download, backend)
            }
            return (download, reading ? try content.openFetchFile(id) : nil)
        }
    }

    /// Runs `download`'s worker. Its end (installed or failed) takes it out of
    /// `downloads` under the database lock, as its start put it in.
    private func start(_ download: Download, _ backend: any ObjectBackend) {
        let (content, downloads, log, workers) = (self.content, self.downloads, options.log, downloadWorkers)
        let isStopped: @Sendable () -> Bool = { [weak self] in self?.remoteSync.withLock({ $0 })?.isStopped ?? true }
        workers.enter()
        download.run(backend, isStopped: isStopped, ended: { workers.leave() }, keeps: { [weak self] download in
            self?.keeps(download) ?? true
        }, finish: { [weak self] download throws(LibraryError) in
            guard let self else { throw .remote("asset \(download.id): the library closed before its data was installed") }
            try self.write { db in
                guard !isStopped() else { throw LibraryError.remote("asset \(download.id): the mount ended before its data was installed") }
                downloads.withLock { _ = $0.removeValue(forKey: download.id) }
                // Purged, no longer evicted, or (a second device's refresh) recorded with
                // another object now: the fetched copy is not the asset's data.
                guard try db.isEvicted(download.id), try db.remoteObject(of: download.id)?.digest.sha256 == download.digest.sha256 else {
                    content.removeTransfer(content.fetchPath(of: download.id)); return
                }
                try content.installFetched(download.id)
                try db.unmarkEvicted(download.id)
            }
            // Over the cache bound now, unless a reader still has it open (its release wakes it too).
            self.wakeRemoteSync()
        }, failed: { [weak self] download, why in
            log("remote: \(why)")
            _ = try? self?.read { _ in
                downloads.withLock { running in
                    if running[download.id] === download { running.removeValue(forKey: download.id) }
                }
                content.removeTransfer(content.fetchPath(of: download.id))
            }
        })
    }

    /// Whether a download whose every chunk came is installed as the asset's
    /// data: not when it is larger than `cache_size` (it could only be
    /// evicted again once its readers close) and nobody pinned it, nor holds
    /// it for an open or a truncate (a writer waits for its install). Else
    /// it is let go here, under the database lock where opens find it: its
    /// readers read on from their descriptors, the next open fetches again.
    private func keeps(_ download: Download) -> Bool {
        guard let limit = options.cacheSize, download.digest.size > limit else { return true }
        let (downloads, content) = (self.downloads, self.content)
        return (try? read { db -> Bool in
            if dataHeld.withLock({ $0[download.id] != nil }) { return true }
            if try db.isKeptLocal(download.id) { return true }
            downloads.withLock { running in
                if running[download.id] === download { running.removeValue(forKey: download.id) }
            }
            content.removeTransfer(content.fetchPath(of: download.id))
            return false
        }) ?? true
    }

    /// Keeps the cache bound off `id` from an open's or a truncate's fetch
    /// until its file is registered (then `OpenFiles` keeps it) or its data
    /// cut: an eviction between the two would take the data from under a
    /// writer (its writes to the unlinked file lost, its truncate cutting
    /// the data fetched anew). Balanced by `releaseData`.
    func holdData(_ id: NodeID) {
        guard remote != nil else { return }
        dataHeld.withLock { $0[id, default: 0] += 1 }
    }

    func releaseData(_ id: NodeID) {
        guard remote != nil else { return }
        dataHeld.withLock { held in
            if let count = held[id], count > 1 { held[id] = count - 1 } else { held[id] = nil }
        }
    }

    /// Brings an evicted asset's data back from the bucket, every chunk of it
    /// checked, before it is opened for writing or its size changed (the
    /// content directory stays the one place data is written).
    func fetchIfEvicted(_ id: NodeID) throws(LibraryError) {
        try download(of: id)?.download.waitForInstall()
    }

    /// Evicts originals the bucket holds, least recently opened first, until
    /// the local ones fit in `options.cacheSize` (none open, being written,
    /// queued, pinned or a favorite, nor one whose facts and thumbnail are
    /// still to be read: `evictionCandidates`). Returns how many.
    @discardableResult
    func evictOverCacheSize() throws(LibraryError) -> Int {
        guard let limit = options.cacheSize, remote != nil, !isReadOnly else { return 0 }
        var local = try read { db in try db.localAssetBytes() }
        guard local > limit else { return 0 }
        let opened = lastOpened.withLock { $0.order }
        let afterFacts = indexer != nil
        let candidates = try read { db in try db.evictionCandidates(limit: 10_000, afterFacts: afterFacts) }
            .sorted { (opened[$0.asset] ?? 0, $0.asset) < (opened[$1.asset] ?? 0, $1.asset) }
        var evicted = 0
        for candidate in candidates where local > limit {
            if try evict(candidate.asset) {
                local -= candidate.size
                evicted += 1
            }
        }
        return evicted
    }

    /// Evicts one asset if it still may be: checked, moved aside and marked
    /// under the database lock (no open can come between), removed after.
    func evict(_ id: NodeID) throws(LibraryError) -> Bool {
        let (content, openFiles) = (self.content, self.openFiles)
        var setAside = false
        let done = try write({ db -> Bool in
            guard !openFiles.isOpen(id), !dataHeld.withLock({ $0[id] != nil }), try !db.isBeingWritten(id), try !db.isQueuedForUpload(id),
                  try !db.isKeptLocal(id), try !db.isEvicted(id),
                  let row = try db.attributes(of: id), let object = try db.remoteObject(of: id),
                  object.digest.size == row.size, object.modified == row.modificationTime else { return false }
            try content.setAsideForEviction(id)
            setAside = true
            try db.markEvicted(id)
            return true
        }, rolledBack: { if setAside { content.restoreEvicted(id) } })
        if done { content.removeTransfer(content.evictPath(of: id)) }
        return done
    }

    /// `user.albumfs.keep`: 1 pins the asset local (its fetch started now if
    /// it was evicted; never evicted), 0 unpins it.
    func setKeptLocal(_ id: NodeID, _ kept: Bool) throws(LibraryError) {
        guard remote != nil else { throw .notSupported }
        try write { db in
            guard try db.kind(of: id) == .asset else { throw LibraryError.notPermitted }
            try db.setKeptLocal(id, kept)
        }
        // The fetch starts now and goes on without the caller.
        if kept { _ = try download(of: id) }
    }

    func isKeptLocal(_ id: NodeID) throws(LibraryError) -> Bool {
        try read { db in try db.isKeptLocal(id) }
    }

    /// An open: the most recent is the last to be evicted.
    func noteOpened(_ id: NodeID) {
        guard options.cacheSize != nil else { return }
        lastOpened.withLock { opened in
            opened.clock &+= 1
            opened.order[id] = opened.clock
        }
    }
}
