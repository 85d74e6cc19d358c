#if canImport(Glibc)
import Glibc
#endif
import Digests
import Foundation
import Testing
@testable import ObjectStore

/// The S3 server the test run started (scripts/test starts a one-node Ceph
/// RADOS Gateway on loopback with scripts/lib/radosgw and exports these).
private let server: (endpoint: String, credentials: Credentials, region: String)? = {
    let environment = ProcessInfo.processInfo.environment
    guard let endpoint = environment["RADOSGW_ENDPOINT"], let key = environment["RADOSGW_ACCESS_KEY"],
          let secret = environment["RADOSGW_SECRET_KEY"] else { return nil }
    return (endpoint, Credentials(accessKey: key, secretKey: secret), environment["RADOSGW_REGION"] ?? "us-east-1")
}()

/// A bucket of its own for each test, under a prefix with a space and a
/// non-ASCII letter (keys are encoded in the path and signed).
/// A new bucket's client and object backend (prefix `lib/`), and a scratch file's path.
private func backendOfNewBucket() throws -> (S3Client, S3ObjectBackend, String) {
    let server = try #require(server)
    let bucket = "t" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
    let location = try RemoteLocation(url: "s3://\(bucket)/lib/", endpoint: server.endpoint, region: server.region)
    let s3 = try S3Client(location: location, credentials: server.credentials)
    try s3.createBucket()
    let backend = try S3ObjectBackend(location: location, credentials: server.credentials)
    return (s3, backend, "/tmp/albumfs-s3-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
}

private func client(prefix: String = "lib räume/") throws -> S3Client {
    let server = try #require(server)
    let bucket = "t" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
    let location = try RemoteLocation(url: "s3://\(bucket)/\(prefix)", endpoint: server.endpoint, region: server.region)
    let client = try S3Client(location: location, credentials: server.credentials)
    try client.createBucket()
    return client
}

@Suite("S3 against a real RADOS Gateway", .enabled(if: server != nil, "needs RADOSGW_ENDPOINT and keys: scripts/test starts one"))
struct LiveS3Tests {
    @Test("put, head, get (whole and a range), list, delete; metadata comes back")
    func roundTrip() throws {
        let s3 = try client()
        let data = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let etag = try s3.put("a/IMG 1.jpg", bytes: data, metadata: ["asset": "17", "sha256": "x"])
        #expect(!etag.isEmpty)
        let info = try #require(try s3.head("a/IMG 1.jpg"))
        #expect(info.size == 100_000 && info.etag == etag && info.metadata["asset"] == "17")
        #expect(try s3.get("a/IMG 1.jpg") == data)
        #expect(try s3.get("a/IMG 1.jpg", range: 10..<20) == Array(data[10..<20]))
        #expect(try s3.list().map(\.key) == ["a/IMG 1.jpg"])
        // Written just now, by the store's clock (loopback: the same as this one, within a minute).
        #expect(try s3.list().allSatisfy { abs(($0.lastModified ?? 0) - Int64(time(nil))) < 60 })
        try s3.delete("a/IMG 1.jpg")
        #expect(try s3.head("a/IMG 1.jpg") == nil)
        #expect(throws: ObjectStoreError.notFound("get a/IMG 1.jpg")) { try s3.get("a/IMG 1.jpg") }
        try s3.delete("a/IMG 1.jpg")   // gone already: fine
    }

    @Test("a file is uploaded from its descriptor and fetched into one; a wrong SHA-256 is refused by the store")
    func files() throws {
        let s3 = try client()
        let path = "/tmp/albumfs-s3-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { unlink(path) }
        let bytes = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 / 7) }
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        #expect(fd >= 0)
        defer { close(fd) }
        #expect(bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } == bytes.count)
        let sha = SHA256.hex(SHA256.digest(bytes))
        try s3.put("big", file: fd, length: Int64(bytes.count), sha256: sha)
        #expect(throws: ObjectStoreError.self) {
            try s3.put("lie", file: fd, length: Int64(bytes.count), sha256: SHA256.empty)
        }
        #expect(try s3.head("lie") == nil, "a body that does not match its signed hash was stored")
        let out = path + ".out"
        defer { unlink(out) }
        let outFD = open(out, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        defer { close(outFD) }
        #expect(try s3.get("big", into: outFD) == Int64(bytes.count))
        var back = [UInt8](repeating: 0, count: bytes.count)
        #expect(back.withUnsafeMutableBytes { pread(outFD, $0.baseAddress, $0.count, 0) } == bytes.count)
        #expect(back == bytes)
    }

    @Test("virtual-host addressing (BUCKET.localhost: radosgw's rgw_dns_name): the bucket made, objects put, read, listed, deleted")
    func virtualHost() throws {
        let server = try #require(server)
        let port = try #require(server.endpoint.split(separator: ":").last)
        let bucket = "v" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        let location = try RemoteLocation(url: "s3://\(bucket)/lib räume/", endpoint: "http://localhost:\(port)",
                                          region: server.region, addressing: .virtualHost)
        #expect(location.host == "\(bucket).localhost:\(port)")
        let s3 = try S3Client(location: location, credentials: server.credentials)
        try s3.createBucket()
        let data = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try s3.put("a/IMG 1.jpg", bytes: data)
        #expect(try s3.get("a/IMG 1.jpg", range: 5..<9) == Array(data[5..<9]))
        #expect(try s3.list("a/").map(\.key) == ["a/IMG 1.jpg"])
        // The same object, path-style: one bucket, two ways of naming it.
        let pathStyle = try S3Client(location: RemoteLocation(url: "s3://\(bucket)/lib räume/", endpoint: server.endpoint,
                                                             region: server.region, addressing: .path),
                                     credentials: server.credentials)
        #expect(try pathStyle.get("a/IMG 1.jpg") == data)
        try s3.delete("a/IMG 1.jpg")
        #expect(try pathStyle.head("a/IMG 1.jpg") == nil)
    }

    @Test("a range is fetched into its place in a file and hashed on the way; a 404's body never reaches the file")
    func rangeIntoFile() throws {
        let s3 = try client()
        let bytes = (0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 / 999) }
        try s3.put("chunked", bytes: bytes)
        let path = "/tmp/albumfs-s3-range-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { unlink(path) }
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        defer { close(fd) }
        let sentinel = [UInt8](repeating: 0xEE, count: 1_000_000)
        #expect(sentinel.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } == sentinel.count)
        let hasher = SHA256()
        #expect(try s3.get("chunked", range: 300_000..<700_000, into: fd, at: 300_000) { hasher.update($0); return true } == 400_000)
        #expect(hasher.finishBytes() == SHA256.digest(Array(bytes[300_000..<700_000])))
        // The receiver stops the transfer: an error, not the object's size.
        #expect(throws: ObjectStoreError.local("the receiver stopped the transfer")) {
            try s3.get("chunked", range: 300_000..<700_000, into: fd, at: 300_000) { _ in false }
        }
        #expect(throws: ObjectStoreError.notFound("get missing")) {
            try s3.get("missing", range: 0..<100, into: fd, at: 0)
        }
        var back = [UInt8](repeating: 0, count: 1_000_000)
        #expect(back.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) } == back.count)
        #expect(Array(back[300_000..<700_000]) == Array(bytes[300_000..<700_000]))
        #expect(Array(back[..<300_000]) == Array(sentinel[..<300_000]), "the 404's body was written into the file")
        #expect(Array(back[700_000...]) == Array(sentinel[700_000...]))
    }

    @Test("an object past the multipart threshold goes up in signed parts; an unfinished upload a crash left is aborted first")
    func multipart() throws {
        let (s3, backend, path) = try backendOfNewBucket()
        defer { unlink(path) }
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        #expect(fd >= 0)
        defer { close(fd) }
        // 16 MiB parts: four whole ones and a short fifth.
        let length = S3ObjectBackend.multipartThreshold + 3 << 20
        var bytes = [UInt8](repeating: 0, count: Int(length))
        for i in stride(from: 0, to: bytes.count, by: 4096) { bytes[i] = UInt8(truncatingIfNeeded: i / 4096) }
        #expect(bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } == bytes.count)
        let sha = SHA256.hex(SHA256.digest(bytes))
        let key = S3ObjectBackend.key(of: sha)
        let stale = try s3.createMultipartUpload(key)
        #expect(try s3.multipartUploads(key).map(\.uploadID) == [stale])
        try backend.store(fd, length: length, sha256: sha)
        #expect(try s3.multipartUploads(key).isEmpty, "the crash's unfinished upload (or this one) was left")
        #expect(try s3.head(key)?.size == length)
        #expect(SHA256.hex(SHA256.digest(try s3.get(key))) == sha)
        // A range past the end: the object's last bytes, in their place in the file.
        let tail = open(path + ".tail", O_RDWR | O_CREAT | O_TRUNC, 0o600)
        defer { close(tail); unlink(path + ".tail") }
        let hasher = SHA256()
        #expect(try backend.fetch(sha256: sha, range: (length - 10)..<(length + 10), into: tail) { hasher.update($0); return true } == 10)
        var last = [UInt8](repeating: 0, count: 10)
        #expect(last.withUnsafeMutableBytes { pread(tail, $0.baseAddress, 10, off_t(length - 10)) } == 10)
        #expect(last == Array(bytes[(bytes.count - 10)...]) && hasher.finishBytes() == SHA256.digest(last))
        // A part whose bytes do not match its signed SHA-256 is refused: the
        // upload fails and is aborted, and no object appears.
        let other = [UInt8](repeating: 7, count: Int(length))
        #expect(other.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } == other.count)
        let lie = String(repeating: "0", count: 64)
        #expect(throws: ObjectStoreError.self) { try backend.store(fd, length: length, sha256: lie) }
        #expect(try s3.head(S3ObjectBackend.key(of: lie)) == nil)
        #expect(try s3.multipartUploads(S3ObjectBackend.key(of: lie)).isEmpty)
    }

    @Test("a small original is stored; one already there with its size is kept (ETag unchanged), one of another size replaced")
    func storeSmall() throws {
        let (s3, backend, path) = try backendOfNewBucket()
        defer { unlink(path) }
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        defer { close(fd) }
        let bytes = Array("a photo, twice".utf8)
        #expect(bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } == bytes.count)
        let sha = SHA256.hex(SHA256.digest(bytes))
        let key = S3ObjectBackend.key(of: sha)
        let first = try backend.store(fd, length: Int64(bytes.count), sha256: sha)
        #expect(try s3.get(key) == bytes)
        // The same content again (an identical photo): the object stays as it is.
        #expect(try backend.store(fd, length: Int64(bytes.count), sha256: sha) == first)
        // An object of another size under the key (cut short behind albumfs's back): replaced.
        try s3.put(key, bytes: Array(bytes.prefix(3)))
        _ = try backend.store(fd, length: Int64(bytes.count), sha256: sha)
        #expect(try s3.get(key) == bytes)
    }

    @Test("a conditional put loses to an object that exists (If-None-Match)")
    func conditionalPut() throws {
        let s3 = try client()
        try s3.put("lease", bytes: Array("first".utf8), ifNoneMatch: true)
        #expect(throws: ObjectStoreError.preconditionFailed) {
            try s3.put("lease", bytes: Array("second".utf8), ifNoneMatch: true)
        }
        #expect(try s3.get("lease") == Array("first".utf8))
    }

    @Test("a listing is continued past its page size, and keys outside the prefix are not listed")
    func pagedListing() throws {
        let s3 = try client()
        for i in 0..<7 { try s3.put("k\(i)", bytes: [UInt8(i)]) }
        let outside = try S3Client(location: RemoteLocation(url: "s3://\(s3.location.bucket)/other", endpoint: s3.location.endpoint,
                                                            region: s3.location.region),
                                   credentials: server!.credentials)
        try outside.put("x", bytes: [1])
        #expect(try s3.list(pageSize: 3).map(\.key) == (0..<7).map { "k\($0)" })
        #expect(try s3.list("k1", pageSize: 3).map(\.key) == ["k1"])
    }

    @Test("wrong keys are .denied, a clock 20 minutes off too, and a closed port is .unreachable")
    func failures() throws {
        let s3 = try client()
        let wrong = try S3Client(location: s3.location, credentials: Credentials(accessKey: server!.credentials.accessKey, secretKey: "wrong"))
        #expect { try wrong.put("x", bytes: [1]) } throws: { error in
            if case ObjectStoreError.denied = error { return true }
            return false
        }
        let late = try S3Client(location: s3.location, credentials: server!.credentials)
        late.now = { Int(time(nil)) - 20 * 60 }
        #expect { try late.head("x") } throws: { error in
            if case ObjectStoreError.denied = error { return true }
            return false
        }
        let nowhere = try S3Client(location: RemoteLocation(url: "s3://nobucket/p", endpoint: "http://127.0.0.1:9"),
                                   credentials: server!.credentials)
        #expect { try nowhere.head("x") } throws: { error in
            if case ObjectStoreError.unreachable = error { return true }
            return false
        }
    }
}
