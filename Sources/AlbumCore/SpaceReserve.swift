#if canImport(Glibc)
import Glibc
#endif

/// A few MiB the store keeps allocated so that a full disk can still be
/// emptied: deleting a photo is itself a database write, which needs space.
/// When such a write fails with ENOSPC the reserve is given up and the write
/// retried; the reserve is taken again once space has been freed.
struct SpaceReserve: Sendable {
    let path: String
    static let size: off_t = 8 << 20

    init(location: StoreLocation) { path = location.root + "/reserve" }

    /// Allocates the reserve if it is missing. Never fails: on a full disk
    /// there is simply no reserve until space is freed.
    func take() {
        var info = stat()
        if stat(path, &info) == 0 && info.st_size >= Self.size { return }
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        if posix_fallocate(fd, 0, Self.size) != 0 {
            unlink(path)
        }
    }

    /// Frees the reserve; returns whether there was one to free.
    func release() -> Bool {
        unlink(path) == 0
    }
}
