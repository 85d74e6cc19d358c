import Dispatch

/// The metadata's snapshots in the bucket, from the library's side
/// (SEMANTICS.md § Surviving the machine). The uploader takes them
/// (RemoteSync); the end of a mount takes the last.
extension Library {
    /// Whether the library has changes that no snapshot in the bucket holds
    /// (the root's `user.albumfs.snapshotting`). Never on a read-only mount
    /// or a store without a remote.
    public var snapshotPending: Bool {
        guard remote != nil, !isReadOnly, remoteSync.withLock({ $0 })?.mirror != true else { return false }
        return snapshotted.withLock { $0 } != changeCount
    }

    /// Takes a snapshot into `backend` now, then deletes the ones retention
    /// lets go (a failure there is logged: the snapshot stands). Returns its key.
    @discardableResult
    func takeSnapshot(_ backend: any ObjectBackend) throws -> String {
        // Read before the copy starts: a change committed during it counts as not held.
        let before = changeCount
        let time = options.now()
        let now = Int(time / 1_000_000_000)
        try pausePoints.reached(.snapshotStarting)
        let (key, _) = try Snapshots.take(of: location, at: time, into: backend) { try pausePoints.reached(.snapshotCopying) }
        snapshotted.withLock { $0 = before }
        do { _ = try Snapshots.prune(backend, now: now) } catch { options.log("remote: deleting old snapshots: \(error) (tried again after the next one)") }
        return key
    }

    /// Someone waits for a snapshot (a read of `user.albumfs.snapshotting`).
    func hurrySnapshot() {
        remoteSync.withLock { $0 }?.hurrySnapshot()
    }

    /// The end of a mount, the uploader stopped: the last changes go in a
    /// snapshot, and a store that ends with every change in one says so
    /// (its next mount then takes none until something changes).
    func takeLastSnapshot(_ backend: any ObjectBackend) {
        guard remote != nil, !isReadOnly else { return }
        if snapshotPending {
            do {
                try takeSnapshot(backend)
            } catch {
                options.log("remote: the last snapshot of the metadata failed: \(error) (the next mount takes one)")
                return
            }
        }
        guard !snapshotPending else { return }
        _ = try? write { db in try db.setSnapshotSaved() }
    }
}
