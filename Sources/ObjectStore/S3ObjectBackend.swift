#if canImport(Glibc)
import Glibc
#endif
import Digests

/// A bucket of originals named by their content: `PREFIX/objects/AB/ABCD…`,
/// the hex SHA-256 of the bytes. Storing what is there already costs a HEAD,
/// so an upload repeated after a crash never makes a second object, and
/// identical photos share one. (AlbumCore's ObjectBackend, conformed to by
/// the daemon.) Each of its two connections takes one request at a time.
public final class S3ObjectBackend: @unchecked Sendable {
    /// The uploader's connection (stores, removes) and the one fetches use,
    /// so that opening a remote-only photo never waits behind an upload.
    private let client: Locked
    private let fetcher: Locked

    public init(location: RemoteLocation, credentials: Credentials) throws(ObjectStoreError) {
        client = Locked(try S3Client(location: location, credentials: credentials))
        fetcher = Locked(try S3Client(location: location, credentials: credentials))
    }

    /// A client and the lock that lets one request at a time through it.
    private final class Locked {
        let client: S3Client
        private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        init(_ client: S3Client) {
            self.client = client
            pthread_mutex_init(mutex, nil)
        }
        deinit {
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
        }
        func run<T>(_ body: (S3Client) throws(ObjectStoreError) -> T) throws(ObjectStoreError) -> T {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(client)
        }
    }

    public static func key(of sha256: String) -> String { "objects/\(sha256.prefix(2))/\(sha256)" }

    /// Stores the `length` bytes at `descriptor` unless the object of that
    /// content is there with that size; returns the content's SHA-256.
    public func store(_ descriptor: Int32, length: Int64) throws -> String {
        let sha256 = try FileDigest.sha256(of: descriptor, length: length)
        try client.run { (s3) throws(ObjectStoreError) in
            let key = Self.key(of: sha256)
            if let existing = try s3.head(key), existing.size == length { return }
            try s3.put(key, file: descriptor, length: length, sha256: sha256)
        }
        return sha256
    }

    public func fetch(sha256: String, length: Int64, into descriptor: Int32) throws {
        let got = try fetcher.run { (s3) throws(ObjectStoreError) in try s3.get(Self.key(of: sha256), into: descriptor) }
        guard got == length else {
            throw ObjectStoreError.corrupt("the object \(Self.key(of: sha256)) has \(got) bytes, not \(length)")
        }
        let actual = try FileDigest.sha256(of: descriptor, length: length)
        guard actual == sha256 else {
            throw ObjectStoreError.corrupt("the object \(Self.key(of: sha256)) holds other data (SHA-256 \(actual))")
        }
    }

    public func remove(sha256: String) throws {
        try client.run { (s3) throws(ObjectStoreError) in try s3.delete(Self.key(of: sha256)) }
    }

    /// Makes the bucket if it is not there (`albumfs init --remote`), which
    /// also proves the endpoint and the keys.
    public func createBucket() throws(ObjectStoreError) {
        try client.run { (s3) throws(ObjectStoreError) in try s3.createBucket() }
    }
}

/// The SHA-256 of a file's first `length` bytes, read with pread in 1 MiB
/// pieces (libcrypto's EVP digest).
public enum FileDigest {
    /// The hex SHA-256 of `bytes`.
    public static func sha256(of bytes: [UInt8]) -> String { SHA256.hex(SHA256.digest(bytes)) }

    public static func sha256(of descriptor: Int32, length: Int64) throws(ObjectStoreError) -> String {
        let hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while offset < length {
            let want = Int(min(Int64(buffer.count), length - offset))
            let got = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, want, off_t(offset)) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { throw .local("reading the file to upload: \(got < 0 ? String(cString: strerror(errno)) : "it is shorter than its size")") }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<got])) }
            offset += Int64(got)
        }
        return hasher.finish()
    }
}
