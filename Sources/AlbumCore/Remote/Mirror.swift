#if canImport(Glibc)
import Glibc
#endif

/// A second device's view of a library (SEMANTICS.md § Surviving the
/// machine): `albumfs mount --remote s3://… -o ro` with no store of its own.
/// Its cache directory holds a store recovered from the bucket's newest
/// snapshot (and the uploads after it), rebuilt when the bucket has a newer
/// one; the mount is read-only in the kernel, and nothing is ever written to
/// the bucket: the originals read come into the cache, bounded by `cache_size`.
extension Library {
    /// Makes the store at `location` the bucket's newest state: kept when it
    /// was made from the newest snapshot, else rebuilt (its cached originals
    /// go with it). Returns the snapshot it holds (nil: none in the bucket).
    public static func prepareMirror(at location: StoreLocation, of remote: RemoteConfiguration, from backend: any ObjectBackend,
                                     owner: Caller, progress: (String) -> Void = { _ in }) throws -> String? {
        let newest = try backend.list(Snapshots.prefix).map(\.key).filter { Snapshots.time(of: $0) != nil }.max()
        let marker = "mirror-of"
        if location.holdsStore {
            if let held = location.readSmallFile(marker), held == (newest ?? "") { return newest }
            progress("a newer snapshot: rebuilding the cache \(location.root)")
            try ContentStore(directory: location.contentPath).removeEverything()
            for path in [location.databasePath, location.walPath, location.databasePath + "-shm", location.root + "/" + marker] { _ = Glibc.unlink(path) }
        }
        let (library, _) = try recover(from: backend, remote: remote, at: nil, into: location, owner: owner, progress: progress)
        withExtendedLifetime(library) {}
        try location.writeSmallFile(marker, newest ?? "")
        return newest
    }
}
