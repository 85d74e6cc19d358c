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
        return try read { db -> String? in
            guard let row = try db.attributes(of: id), row.kind == .asset else { return nil }
            if try db.isQueuedForUpload(id) || db.isBeingWritten(id) { return "uploading" }
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
