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

/// The bucket as the library uses it: objects named by the SHA-256 of their
/// content. The daemon's is S3 (albumfs' S3ObjectBackend); AlbumCore knows
/// nothing of HTTP.
public protocol ObjectBackend: Sendable {
    /// Stores the `length` bytes of the file open at `descriptor` (read with
    /// pread), unless an object of that content is there already; returns
    /// the content's SHA-256 (hex), its object's name.
    func store(_ descriptor: Int32, length: Int64) throws -> String
    /// Removes the object of content `sha256` (none there: fine).
    func remove(sha256: String) throws
    /// Writes the object of content `sha256` into `descriptor` from offset 0,
    /// and checks that it is that content, `length` bytes: a wrong object
    /// throws, and what was written must not be used.
    func fetch(sha256: String, length: Int64, into descriptor: Int32) throws
}
