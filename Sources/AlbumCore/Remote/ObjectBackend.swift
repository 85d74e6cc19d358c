import Digests

/// Where a store's remote is: an `s3://BUCKET/PREFIX` address, its endpoint
/// and region, and the profile of the credentials file its keys are in (nil:
/// the environment's, else the default profile). Never the keys.
public struct RemoteConfiguration: Sendable, Equatable {
    public let url: String
    public let endpoint: String
    public let region: String
    public let profile: String?

    public init(url: String, endpoint: String, region: String, profile: String?) {
        (self.url, self.endpoint, self.region, self.profile) = (url, endpoint, region, profile)
    }
}

/// An object a listing names: its key, size, and when it was last written in
/// seconds since 1970 by the bucket's clock (nil: the store does not say).
public typealias ListedObject = (key: String, size: Int64, modified: Int64?)

/// The bucket as the library uses it: objects named by the SHA-256 of their
/// content. The daemon's is S3 (albumfs' S3ObjectBackend); AlbumCore knows
/// nothing of HTTP, and checks every byte that comes back itself.
public protocol ObjectBackend: Sendable {
    /// Stores the `length` bytes of the file open at `descriptor` (read with
    /// pread) as the object of content `sha256` (hex), unless it is there
    /// with that size. Returns the object's ETag.
    func store(_ descriptor: Int32, length: Int64, sha256: String) throws -> String
    /// Removes the object of content `sha256` (none there: fine).
    func remove(sha256: String) throws
    /// Bytes `range` of the object of content `sha256`, as the bucket gives
    /// them (fewer when the object is shorter), written into the file open
    /// at `descriptor` at their own offsets (never past `range`), and each
    /// piece, once written, given in order to `observe`, which stops the
    /// transfer by answering false (the fetch then throws); how many came.
    /// What it wrote before an error may be anything.
    func fetch(sha256: String, range: Range<Int64>, into descriptor: Int32,
               observing observe: (UnsafeRawBufferPointer) -> Bool) throws -> Int64
    /// The size and ETag of the object of content `sha256` (the ETag changes
    /// when the object is overwritten, even by bytes of the same size); nil:
    /// there is none.
    func head(sha256: String) throws -> (size: Int64, etag: String)?
    /// Every object named by a content in the library's part of the bucket
    /// (`albumfs fsck --remote`).
    func objects() throws -> [(sha256: String, size: Int64, etag: String)]

    // Named objects besides the originals (SEMANTICS.md § Surviving the
    // machine): the metadata snapshots and the companions. Keys are under
    // the library's prefix.

    /// Stores `length` bytes of the file open at `descriptor` (from offset 0) as `key`, in one PUT.
    func put(_ key: String, file descriptor: Int32, length: Int64) throws
    /// Stores `bytes` as `key`.
    func put(_ key: String, bytes: [UInt8]) throws
    /// The object `key`, written into the file open at `descriptor` from
    /// offset 0; how many bytes. A missing object is an error.
    func get(_ key: String, into descriptor: Int32) throws -> Int64
    /// The object `key`'s bytes (a small one); nil: there is none.
    func get(_ key: String) throws -> [UInt8]?
    /// The same, for a reader (a listing's thumbnail): on the connections
    /// originals are fetched on, within their timeouts, never behind an upload.
    func getForReader(_ key: String) throws -> [UInt8]?
    /// The objects whose keys start with `prefix`, in key order.
    func list(_ prefix: String) throws -> [ListedObject]
    /// Removes the object `key` (none there: fine).
    func remove(_ key: String) throws
}

extension ObjectBackend {
    public func getForReader(_ key: String) throws -> [UInt8]? { try get(key) }
}
