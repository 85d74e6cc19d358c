#if canImport(Glibc)
import Glibc
#endif
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
    public func startRemoteSync(_ backend: any ObjectBackend) {
        guard remote != nil, !isReadOnly else { return }
        let sync = RemoteSync(backend: backend)
        remoteSync.withLock { $0 = sync }
        sync.start(for: self)
    }

    /// At the end of a mount: no upload or delete is recorded after this
    /// returns (what is left resumes at the next mount).
    public func stopRemoteSync(timeout: Double = 5) {
        guard let sync = remoteSync.withLock({ $0 }) else { return }
        sync.stop(timeout: timeout)
        _ = try? read { _ in }
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
        if fetching.withLock({ $0.contains(id) }) { return "downloading" }
        return try read { db -> String? in
            guard let row = try db.attributes(of: id), row.kind == .asset else { return nil }
            if try db.isQueuedForUpload(id) || db.isBeingWritten(id) { return "uploading" }
            if try db.isEvicted(id) { return "remote" }
            if let object = try db.remoteObject(of: id), object.size == row.size, object.modified == row.modificationTime {
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
    /// Brings an evicted asset's data back from the bucket, verified against
    /// its SHA-256, before it is opened or its size changed (the content
    /// directory stays the one place data is read and written). Nothing is
    /// held while it downloads; the data becomes the asset's under the lock,
    /// if the asset is still evicted then.
    func fetchIfEvicted(_ id: NodeID) throws(LibraryError) {
        guard remote != nil, try read({ db in try db.isEvicted(id) }) else { return }
        guard let backend = remoteSync.withLock({ $0 })?.backend else {
            throw .remote("asset \(id) is only in the bucket, and this mount does not reach it (a read-only mount fetches nothing)")
        }
        guard let (object, modified) = try read({ db -> ((sha256: String, size: Int64, modified: Nanoseconds), Nanoseconds)? in
            guard let object = try db.remoteObject(of: id), let row = try db.attributes(of: id) else { return nil }
            return (object, row.modificationTime)
        }) else { throw .inconsistent("evicted asset \(id) has no object on record") }
        fetching.withLock { _ = $0.insert(id) }
        defer { fetching.withLock { _ = $0.remove(id) } }
        let descriptor = try content.createFetchFile(id)
        defer { close(descriptor) }
        do {
            try backend.fetch(sha256: object.sha256, length: object.size, into: descriptor)
            try ContentStore.setModificationTime(of: descriptor, to: modified)
        } catch {
            content.removeTransfer(content.fetchPath(of: id))
            throw .remote("asset \(id): its data is only in the bucket and cannot be had: \(error)")
        }
        let content = self.content
        try write { db in
            guard try db.isEvicted(id) else { content.removeTransfer(content.fetchPath(of: id)); return }
            try content.installFetched(id)
            try db.unmarkEvicted(id)
        }
    }

    /// Evicts originals the bucket holds, least recently opened first, until
    /// the local ones fit in `options.cacheSize` (none open, being written,
    /// queued, pinned or a favorite: `evictionCandidates`). Returns how many.
    @discardableResult
    func evictOverCacheSize() throws(LibraryError) -> Int {
        guard let limit = options.cacheSize, remote != nil, !isReadOnly else { return 0 }
        var local = try read { db in try db.localAssetBytes() }
        guard local > limit else { return 0 }
        let opened = lastOpened.withLock { $0.order }
        let candidates = try read { db in try db.evictionCandidates(limit: 10_000) }
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
    private func evict(_ id: NodeID) throws(LibraryError) -> Bool {
        let (content, openFiles) = (self.content, self.openFiles)
        var setAside = false
        let done = try write({ db -> Bool in
            guard !openFiles.isOpen(id), try !db.isBeingWritten(id), try !db.isQueuedForUpload(id),
                  try !db.isKeptLocal(id), try !db.isEvicted(id),
                  let row = try db.attributes(of: id), let object = try db.remoteObject(of: id),
                  object.size == row.size, object.modified == row.modificationTime else { return false }
            try content.setAsideForEviction(id)
            setAside = true
            try db.markEvicted(id)
            return true
        }, rolledBack: { if setAside { content.restoreEvicted(id) } })
        if done { content.removeTransfer(content.evictPath(of: id)) }
        return done
    }

    /// `user.albumfs.keep`: 1 pins the asset local (fetched now if it was
    /// evicted, never evicted), 0 unpins it.
    func setKeptLocal(_ id: NodeID, _ kept: Bool) throws(LibraryError) {
        guard remote != nil else { throw .notSupported }
        try write { db in
            guard try db.kind(of: id) == .asset else { throw LibraryError.notPermitted }
            try db.setKeptLocal(id, kept)
        }
        if kept { try fetchIfEvicted(id) }
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
