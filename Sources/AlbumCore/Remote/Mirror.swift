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
        let marker = location.root + "/mirror-of"
        if location.holdsStore {
            if let held = readSmallFile(marker), held == (newest ?? "") { return newest }
            progress("a newer snapshot: rebuilding the cache \(location.root)")
            try ContentStore(directory: location.contentPath).removeEverything()
            for path in [location.databasePath, location.walPath, location.databasePath + "-shm", marker] { _ = Glibc.unlink(path) }
        }
        let (library, _) = try recover(from: backend, remote: remote, at: nil, into: location, owner: owner, progress: progress)
        withExtendedLifetime(library) {}
        try writeSmallFile(marker, newest ?? "")
        return newest
    }

    private static func readSmallFile(_ path: String) -> String? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let got = Glibc.read(fd, &buffer, buffer.count)
        return got >= 0 ? String(decoding: buffer[0..<got], as: UTF8.self) : nil
    }

    private static func writeSmallFile(_ path: String, _ text: String) throws(LibraryError) {
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw LibraryError(errno: errno) }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        guard Glibc.write(fd, bytes, bytes.count) == bytes.count, fsync(fd) == 0 else { throw LibraryError(errno: errno) }
    }
}
