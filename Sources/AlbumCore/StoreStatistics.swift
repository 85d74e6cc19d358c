#if canImport(Glibc)
import Glibc
#endif
import SQLiteKit

/// What a store holds, for `albumfs stats`: read from the database alone
/// (one pass over the node table, whatever the size of the library), and
/// readable while the store is mounted (a WAL reader disturbs nobody).
public struct StoreStatistics: Sendable, Equatable {
    /// Live assets (in the roll) and their bytes.
    public var assets: Int64 = 0
    public var bytes: Int64 = 0
    public var albums: Int64 = 0
    /// Assets in Recently Deleted and their bytes.
    public var deletedAssets: Int64 = 0
    public var deletedBytes: Int64 = 0
    /// Files that belong to one directory and are no assets (SEMANTICS.md § side files).
    public var sideFiles: Int64 = 0
    /// Live assets by kind (`photo`, `video`, `audio`, `other`), as far as
    /// their facts were read; `unread`: those not read yet.
    public var kinds: [String: Int64] = [:]
    public var unread: Int64 = 0
    public var favorites: Int64 = 0
    public var schemaVersion = 0
    /// The remote (`s3://… at ENDPOINT`; nil: none), the uploads it waits for
    /// (assets, bytes), and the objects the bucket holds for the library.
    public var remote: String?
    public var uploadsPending: Int64 = 0
    public var uploadBytesPending: Int64 = 0
    public var objects: Int64 = 0
    /// When the upload that has waited longest was queued (ns since the
    /// epoch; nil: none waits, or it was queued by an older albumfs).
    public var oldestUploadQueued: Nanoseconds?
    /// Bytes of originals (live and in Recently Deleted) on the local disk,
    /// and those only in the bucket (evicted: `-o cache_size`).
    public var localBytes: Int64 = 0
    public var remoteOnlyBytes: Int64 = 0
    public var remoteOnlyAssets: Int64 = 0
    /// What the uploader last failed at and when, while it is failing.
    public var lastRemoteError: String?
    public var lastRemoteErrorTime: Nanoseconds?

    public static func read(_ location: StoreLocation) throws(LibraryError) -> StoreStatistics {
        guard access(location.databasePath, R_OK) == 0 else {
            throw .unusableStore("there is no readable store database at \(location.databasePath)")
        }
        do {
            let db = try Database(path: location.databasePath, mode: .readOnly)
            db.setBusyTimeout(milliseconds: 5_000)
            return try db.storeStatistics()
        } catch let error as SQLiteError {
            throw .unusableStore("cannot read the store's database: \(error.message)")
        } catch {
            throw .unusableStore("cannot read the store: \(error)")
        }
    }
}

extension StoreLock {
    /// Whether a daemon holds the store now.
    public static func isHeld(_ location: StoreLocation) -> Bool {
        let fd = open(location.lockPath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {
            flock(fd, LOCK_UN)
            return false
        }
        return errno == EWOULDBLOCK
    }
}
