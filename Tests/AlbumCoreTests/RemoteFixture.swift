#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import AlbumCore
import ObjectStore

extension S3ObjectBackend: ObjectBackend {}
extension S3ObjectBackend: LeaseBucket {}

/// The RADOS Gateway scripts/test started (scripts/lib/radosgw).
let gateway: (endpoint: String, credentials: Credentials)? = {
    let environment = ProcessInfo.processInfo.environment
    guard let endpoint = environment["RADOSGW_ENDPOINT"], let key = environment["RADOSGW_ACCESS_KEY"],
          let secret = environment["RADOSGW_SECRET_KEY"] else { return nil }
    return (endpoint, Credentials(accessKey: key, secretKey: secret))
}()

/// Polls `condition`, bounded: only for what the contract says is eventual
/// (uploads, deletes and evictions are background work: SEMANTICS.md § Remote storage).
func eventually(_ what: String, timeout: Double = 30, _ condition: () throws -> Bool,
                        sourceLocation: SourceLocation = #_sourceLocation) {
    let deadline = Date().addingTimeInterval(timeout)
    while !((try? condition()) ?? false) && Date() < deadline { usleep(20_000) }
    #expect((try? condition()) == true, "not within \(timeout) s: \(what)", sourceLocation: sourceLocation)
}

/// A store with a remote in a bucket of its own, and a client of the test's
/// own to look into the bucket (not albumfs').
struct RemoteFixture {
    let store: TestStore
    let remote: RemoteConfiguration
    let bucket: S3Client

    init(trashDays: Int = 30, cacheSize: Int64? = nil, endpoint: String? = nil, uploadSettle: Double? = nil,
         snapshotSettle: Double? = nil, log: @escaping @Sendable (String) -> Void = { _ in }) throws {
        let gateway = try #require(gateway)
        let name = "r" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        remote = RemoteConfiguration(url: "s3://\(name)/lib", endpoint: endpoint ?? gateway.endpoint, region: "us-east-1", profile: nil)
        bucket = try S3Client(location: RemoteLocation(url: remote.url, endpoint: gateway.endpoint), credentials: gateway.credentials)
        try bucket.createBucket()
        var options = LibraryOptions(trashDays: trashDays)
        options.cacheSize = cacheSize
        if let uploadSettle { options.uploadSettle = uploadSettle }
        if let snapshotSettle { options.snapshotSettle = snapshotSettle }
        options.log = log
        store = try TestStore(options: options)
        try store.library.setRemote(remote, everyAsset: false)
        store.close()
        try store.reopen()
    }

    func backend() throws -> S3ObjectBackend {
        try S3ObjectBackend(location: RemoteLocation(url: remote.url, endpoint: remote.endpoint), credentials: gateway!.credentials)
    }

    func start() throws { store.library.startRemoteSync(try backend()) }

    /// Uploads are eventual (SEMANTICS.md § Remote storage): polled, bounded.
    func synced(timeout: Double = 30, sourceLocation: SourceLocation = #_sourceLocation) throws {
        eventually("every upload done", timeout: timeout, { try store.library.uploadsQueued() == 0 }, sourceLocation: sourceLocation)
    }

    func objects() throws -> [String: [UInt8]] {
        var found: [String: [UInt8]] = [:]
        for object in try bucket.list("objects/") { found[object.key] = try bucket.get(object.key) }
        return found
    }

    func storage(_ id: NodeID) -> String? {
        (try? store.library.extendedAttribute(id, Array("user.albumfs.storage".utf8))).map { String(decoding: $0, as: UTF8.self) }
    }

    static func key(_ bytes: [UInt8]) -> String {
        S3ObjectBackend.key(of: FileDigest.sha256(of: bytes))
    }
}
