#if canImport(Glibc)
import Glibc
#endif
import Digests
import Synchronization

/// A bucket of originals named by their content: `PREFIX/objects/AB/ABCD…`,
/// the hex SHA-256 of the bytes. Storing what is there already costs a HEAD,
/// so an upload repeated after a crash never makes a second object, and
/// identical photos share one. (AlbumCore's ObjectBackend, conformed to by
/// the daemon.) Each of its connections takes one request at a time.
public final class S3ObjectBackend: @unchecked Sendable {
    /// The uploader's connection (stores, removes) and the ones fetches use,
    /// so that opening a remote-only photo never waits behind an upload; a
    /// download keeps several chunks on their way at once (Download).
    private let client: Locked
    private let fetchers: [Locked]
    private let nextFetcher = Atomic<UInt>(0)
    public static let fetchConnections = 3
    /// Stores of originals and puts of named objects may run a few at once
    /// (the uploader sends small photos `uploadConnections` at a time): the
    /// uploader's connection and these.
    private let uploaders: [Locked]
    private let nextUploader = Atomic<UInt>(0)
    public static let uploadConnections = 4

    /// `fetchTimeouts`: the fetcher's (a reader waits on it: `-o remote_timeout`).
    public init(location: RemoteLocation, credentials: Credentials,
                fetchTimeouts: RequestTimeouts = .within(10)) throws(ObjectStoreError) {
        client = Locked(try S3Client(location: location, credentials: credentials))
        var fetchers: [Locked] = []
        for _ in 0..<Self.fetchConnections {
            fetchers.append(Locked(try S3Client(location: location, credentials: credentials, timeouts: fetchTimeouts)))
        }
        self.fetchers = fetchers
        var uploaders = [client]
        for _ in 1..<Self.uploadConnections {
            uploaders.append(Locked(try S3Client(location: location, credentials: credentials)))
        }
        self.uploaders = uploaders
    }

    /// A free upload connection, else the next one in turn (waiting for it).
    private func uploading<T>(_ body: (S3Client) throws(ObjectStoreError) -> T) throws(ObjectStoreError) -> T {
        for uploader in uploaders {
            if let result = try uploader.runIfFree(body) { return result }
        }
        let next = Int(nextUploader.add(1, ordering: .relaxed).oldValue % UInt(uploaders.count))
        return try uploaders[next].run(body)
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
        /// `body`'s result if the connection is free now; nil (nothing run) if it is busy.
        func runIfFree<T>(_ body: (S3Client) throws(ObjectStoreError) -> T) throws(ObjectStoreError) -> T? {
            guard pthread_mutex_trylock(mutex) == 0 else { return nil }
            defer { pthread_mutex_unlock(mutex) }
            return try body(client)
        }
    }

    public static func key(of sha256: String) -> String { "objects/\(sha256.prefix(2))/\(sha256)" }

    /// Objects larger than this go up in parts (one PUT takes 5 GiB at most).
    public static let multipartThreshold: Int64 = 64 << 20
    /// A part's size: 16 MiB, larger for objects of more than 10,000 of them.
    static func partSize(of length: Int64) -> Int64 {
        let mebibyte: Int64 = 1 << 20
        let needed = (length + 9_999) / 10_000
        return max(16 * mebibyte, (needed + mebibyte - 1) / mebibyte * mebibyte)
    }

    /// Stores the `length` bytes at `descriptor` as the object of content
    /// `sha256`, unless it is there with that size: one signed PUT, or a
    /// multipart upload past `multipartThreshold` (each part signed with its
    /// own SHA-256; the unfinished uploads of the key that a crash left are
    /// aborted first, and a failed one is aborted).
    public func store(_ descriptor: Int32, length: Int64, sha256: String) throws -> String {
        try uploading { (s3) throws(ObjectStoreError) -> String in
            let key = Self.key(of: sha256)
            if let existing = try s3.head(key), existing.size == length { return existing.etag }
            guard length > Self.multipartThreshold else {
                return try s3.put(key, file: descriptor, length: length, sha256: sha256)
            }
            for stale in try s3.multipartUploads(key) where stale.key == key {
                try s3.abortMultipartUpload(key, uploadID: stale.uploadID)
            }
            let uploadID = try s3.createMultipartUpload(key)
            do throws(ObjectStoreError) {
                let size = Self.partSize(of: length)
                let whole = SHA256()
                var parts: [String] = []
                var offset: Int64 = 0
                while offset < length {
                    let part = min(size, length - offset)
                    let digest = try FileDigest.sha256(of: descriptor, range: offset..<(offset + part), alsoInto: whole)
                    parts.append(try s3.uploadPart(key, uploadID: uploadID, number: parts.count + 1, file: descriptor,
                                                   offset: offset, length: part, sha256: digest))
                    offset += part
                }
                // Each part was checked against its own digest; the object's
                // name is checked against the whole before it exists.
                let actual = whole.finish()
                guard actual == sha256 else {
                    throw .local("the file to upload is not the content \(sha256) (SHA-256 \(actual)): it changed, or was misnamed")
                }
                return try s3.completeMultipartUpload(key, uploadID: uploadID, parts: parts)
            } catch {
                try? s3.abortMultipartUpload(key, uploadID: uploadID)
                throw error
            }
        }
    }

    /// Bytes `range` of the object (unchecked: the library checks them),
    /// written into the file open at `descriptor` at the same offsets, and
    /// shown to `observe` on their way (one copy: no buffer of the range, no
    /// second pass to hash it); how many came. Never more than `range` is
    /// written.
    public func fetch(sha256: String, range: Range<Int64>, into descriptor: Int32,
                      observing observe: (UnsafeRawBufferPointer) -> Bool) throws -> Int64 {
        try fetcherInTurn().run { (s3) throws(ObjectStoreError) in
            try s3.get(Self.key(of: sha256), range: range, into: descriptor, at: range.lowerBound, observing: observe)
        }
    }

    /// The size and ETag of the object of content `sha256`; nil when there is none.
    public func head(sha256: String) throws -> (size: Int64, etag: String)? {
        try client.run { (s3) throws(ObjectStoreError) in try s3.head(Self.key(of: sha256)).map { ($0.size, $0.etag) } }
    }

    /// Every object under `objects/` whose key is a content name: (SHA-256, size, ETag).
    public func objects() throws -> [(sha256: String, size: Int64, etag: String)] {
        try client.run { (s3) throws(ObjectStoreError) in
            try s3.list("objects/").compactMap { object in
                let name = object.key.split(separator: "/").last.map(String.init) ?? ""
                guard object.key == Self.key(of: name), name.count == 64, name.allSatisfy(\.isHexDigit) else { return nil }
                return (name, object.size, object.etag)
            }
        }
    }

    public func remove(sha256: String) throws {
        try client.run { (s3) throws(ObjectStoreError) in try s3.delete(Self.key(of: sha256)) }
    }

    // MARK: named objects (snapshots, companions), on the uploader's connection

    public func put(_ key: String, file descriptor: Int32, length: Int64) throws {
        let sha256 = try FileDigest.sha256(of: descriptor, length: length)
        try client.run { (s3) throws(ObjectStoreError) in _ = try s3.put(key, file: descriptor, length: length, sha256: sha256) }
    }

    public func put(_ key: String, bytes: [UInt8]) throws {
        try uploading { (s3) throws(ObjectStoreError) in _ = try s3.put(key, bytes: bytes) }
    }

    public func get(_ key: String, into descriptor: Int32) throws -> Int64 {
        try client.run { (s3) throws(ObjectStoreError) in
            // A HEAD first: a missing object's error body must not become the file.
            guard try s3.head(key) != nil else { throw .notFound(key) }
            return try s3.get(key, into: descriptor)
        }
    }

    public func get(_ key: String) throws -> [UInt8]? {
        try client.run { (s3) throws(ObjectStoreError) in try Self.bytes(of: key, s3) }
    }

    /// A small object for a reader, on a fetch connection.
    public func getForReader(_ key: String) throws -> [UInt8]? {
        try fetcherInTurn().run { (s3) throws(ObjectStoreError) in try Self.bytes(of: key, s3) }
    }

    /// The object `key`'s bytes; nil: there is none.
    private static func bytes(of key: String, _ s3: S3Client) throws(ObjectStoreError) -> [UInt8]? {
        do throws(ObjectStoreError) { return try s3.get(key) } catch .notFound { return nil }
    }

    /// The next fetch connection, in turn: the fetches of one download at
    /// once go on connections of their own.
    private func fetcherInTurn() -> Locked {
        fetchers[Int(nextFetcher.add(1, ordering: .relaxed).oldValue % UInt(fetchers.count))]
    }

    public func list(_ prefix: String) throws -> [(key: String, size: Int64, modified: Int64?)] {
        try client.run { (s3) throws(ObjectStoreError) in try s3.list(prefix).map { ($0.key, $0.size, $0.lastModified) } }
    }

    public func remove(_ key: String) throws {
        try client.run { (s3) throws(ObjectStoreError) in try s3.delete(key) }
    }

    // MARK: the lease (conditional requests)

    public func read(_ key: String) throws -> (bytes: [UInt8], etag: String)? {
        try client.run { (s3) throws(ObjectStoreError) in try s3.getWithETag(key) }
    }

    /// Stores `bytes` as `key` if there is no such object (`etag` nil) or it
    /// has that ETag; nil when it did not (412). Whether the store honours
    /// the condition is for `probeConditionalPut` to say.
    public func put(_ key: String, bytes: [UInt8], ifETag etag: String?) throws -> String? {
        try client.run { (s3) throws(ObjectStoreError) -> String? in
            do throws(ObjectStoreError) {
                return try s3.put(key, bytes: bytes, ifNoneMatch: etag == nil, ifMatch: etag)
            } catch .preconditionFailed {
                return nil
            }
        }
    }

    /// Whether the store refuses a PUT with `If-None-Match: *` over an
    /// object that exists (some accept the header and ignore it): one
    /// object `key` written, tried again conditionally, and removed.
    public func probeConditionalPut(_ key: String) throws -> Bool {
        try client.run { (s3) throws(ObjectStoreError) -> Bool in
            _ = try s3.put(key, bytes: Array("probe".utf8))
            defer { try? s3.delete(key) }
            do throws(ObjectStoreError) {
                _ = try s3.put(key, bytes: Array("probe again".utf8), ifNoneMatch: true)
                return false
            } catch .preconditionFailed {
                return true
            }
        }
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
        try sha256(of: descriptor, range: 0..<length)
    }

    /// The hex SHA-256 of bytes `range` of the file; `alsoInto` is given the
    /// same bytes.
    public static func sha256(of descriptor: Int32, range: Range<Int64>, alsoInto other: SHA256? = nil) throws(ObjectStoreError) -> String {
        let hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = range.lowerBound
        while offset < range.upperBound {
            let want = Int(min(Int64(buffer.count), range.upperBound - offset))
            let got = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, want, off_t(offset)) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { throw .local("reading the file to upload: \(got < 0 ? String(cString: strerror(errno)) : "it is shorter than its size")") }
            buffer.withUnsafeBytes { piece in
                hasher.update(UnsafeRawBufferPointer(rebasing: piece[0..<got]))
                other?.update(UnsafeRawBufferPointer(rebasing: piece[0..<got]))
            }
            offset += Int64(got)
        }
        return hasher.finish()
    }
}
