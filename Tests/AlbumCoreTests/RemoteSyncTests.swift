#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import AlbumCore
import ObjectStore

extension S3ObjectBackend: ObjectBackend {}

/// The RADOS Gateway scripts/test started (scripts/lib/radosgw).
private let gateway: (endpoint: String, credentials: Credentials)? = {
    let environment = ProcessInfo.processInfo.environment
    guard let endpoint = environment["RADOSGW_ENDPOINT"], let key = environment["RADOSGW_ACCESS_KEY"],
          let secret = environment["RADOSGW_SECRET_KEY"] else { return nil }
    return (endpoint, Credentials(accessKey: key, secretKey: secret))
}()

/// Polls `condition`, bounded: only for what the contract says is eventual
/// (uploads, deletes and evictions are background work: SEMANTICS.md § Remote storage).
private func eventually(_ what: String, timeout: Double = 30, _ condition: () throws -> Bool,
                        sourceLocation: SourceLocation = #_sourceLocation) {
    let deadline = Date().addingTimeInterval(timeout)
    while !((try? condition()) ?? false) && Date() < deadline { usleep(20_000) }
    #expect((try? condition()) == true, "not within \(timeout) s: \(what)", sourceLocation: sourceLocation)
}

/// A store with a remote in a bucket of its own, and a client of the test's
/// own to look into the bucket (not albumfs').
private struct RemoteFixture {
    let store: TestStore
    let remote: RemoteConfiguration
    let bucket: S3Client

    init(trashDays: Int = 30, cacheSize: Int64? = nil, endpoint: String? = nil) throws {
        let gateway = try #require(gateway)
        let name = "r" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        remote = RemoteConfiguration(url: "s3://\(name)/lib", endpoint: endpoint ?? gateway.endpoint, region: "us-east-1", profile: nil)
        bucket = try S3Client(location: RemoteLocation(url: remote.url, endpoint: gateway.endpoint), credentials: gateway.credentials)
        try bucket.createBucket()
        var options = LibraryOptions(trashDays: trashDays)
        options.cacheSize = cacheSize
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

@Suite("Remote storage: originals uploaded to a real RADOS Gateway", .serialized,
       .enabled(if: gateway != nil, "needs RADOSGW_ENDPOINT and keys: scripts/test starts one"))
struct RemoteSyncTests {
    @Test("every closed original lands in the bucket under its content's name; identical ones share an object")
    func uploads() throws {
        let f = try RemoteFixture()
        let a = try f.store.createFile(TestStore.roll, "a.jpg", contents: bytes("photo A"))
        let b = try f.store.createFile(TestStore.roll, "b.jpg", contents: bytes("photo B"))
        let twin = try f.store.createFile(TestStore.roll, "twin.jpg", contents: bytes("photo A"))
        #expect(f.storage(a) == "uploading")
        #expect(try f.store.library.extendedAttribute(TestStore.root, Array("user.albumfs.uploading".utf8)) == Array("3".utf8))
        try f.start()
        try f.synced()
        #expect(try f.objects() == [RemoteFixture.key(bytes("photo A")): bytes("photo A"),
                                    RemoteFixture.key(bytes("photo B")): bytes("photo B")])
        #expect([a, b, twin].map(f.storage) == ["both", "both", "both"])
        f.store.library.stopRemoteSync()
    }

    @Test("an edit uploads the new content and deletes the old object once nothing needs it")
    func edits() throws {
        let f = try RemoteFixture()
        try f.start()
        let a = try f.store.createFile(TestStore.roll, "a.jpg", contents: bytes("first"))
        try f.synced()
        try f.store.write(a, bytes("second version"))
        try f.synced()
        // The delete comes after the upload, on the same worker: wait for it (eventual too).
        eventually("the old object deleted") { try f.objects().count == 1 }
        #expect(try f.objects() == [RemoteFixture.key(bytes("second version")): bytes("second version")])
        #expect(f.storage(a) == "both")
        f.store.library.stopRemoteSync()
    }

    @Test("a purge deletes the object only once no asset with the same content is left")
    func purges() throws {
        let f = try RemoteFixture(trashDays: 0)
        try f.start()
        try f.store.createFile(TestStore.roll, "a.jpg", contents: bytes("same"))
        try f.store.createFile(TestStore.roll, "b.jpg", contents: bytes("same"))
        try f.synced()
        let key = RemoteFixture.key(bytes("same"))
        try f.store.unlink(TestStore.roll, "a.jpg")
        try f.store.createFile(TestStore.roll, "c.jpg", contents: bytes("other"))
        try f.synced()   // the worker ran past any delete owed
        #expect(try f.bucket.head(key) != nil, "an object another asset needs was deleted")
        try f.store.unlink(TestStore.roll, "b.jpg")
        eventually("the last asset's purge deleted its object") { try f.bucket.head(key) == nil }
        f.store.library.stopRemoteSync()
    }

    @Test("an unreachable store keeps every upload queued (never dropped), and they go once it answers")
    func unreachable() throws {
        let f = try RemoteFixture(endpoint: "http://127.0.0.1:9")
        try f.start()
        let a = try f.store.createFile(TestStore.roll, "a.jpg", contents: bytes("kept"))
        eventually("the uploader failing") { f.store.library.lastRemoteError != nil }
        #expect(f.store.library.lastRemoteError?.contains("unreachable") == true)
        #expect(try f.store.library.uploadsQueued() == 1)
        #expect(f.storage(a) == "uploading")
        // Everything else goes on: a rename, a new file, a delete.
        try f.store.rename(TestStore.roll, "a.jpg", to: TestStore.roll, "b.jpg")
        try f.store.createFile(TestStore.roll, "c.jpg", contents: bytes("more"))
        f.store.library.stopRemoteSync()
        // The store is back (the same bucket through the endpoint that answers).
        let library = try f.store.reopen()
        library.startRemoteSync(try S3ObjectBackend(location: RemoteLocation(url: f.remote.url, endpoint: gateway!.endpoint),
                                                    credentials: gateway!.credentials))
        try f.synced()
        #expect(Set(try f.objects().values.map { String(decoding: $0, as: UTF8.self) }) == ["kept", "more"])
        library.stopRemoteSync()
    }


    @Test("with a cache bound, uploaded originals are evicted least recently opened first; stat keeps the size; an open fetches the data back")
    func evictionAndFetch() throws {
        let f = try RemoteFixture()
        let data = ["a": [UInt8](repeating: 1, count: 100), "b": [UInt8](repeating: 2, count: 100), "c": [UInt8](repeating: 3, count: 100)]
        var ids: [String: NodeID] = [:]
        for name in ["c", "a", "b"] { ids[name] = try f.store.createFile(TestStore.roll, name, contents: data[name]!) }
        try f.start()
        try f.synced()
        f.store.library.stopRemoteSync()
        // All three in the bucket; now mounted with room for one and a half.
        var options = LibraryOptions()
        options.cacheSize = 150
        let library = try f.store.reopen(options: options)
        // c is the oldest import, but the one opened last: it stays.
        _ = try f.store.read(ids["c"]!)
        try f.start()
        eventually("two of three evicted") { f.storage(ids["a"]!) == "remote" && f.storage(ids["b"]!) == "remote" }
        #expect(f.storage(ids["c"]!) == "both")
        let a = try library.attributes(of: ids["a"]!)
        #expect(a.size == 100 && a.isRemoteOnly, "stat of a remote-only original: its real size, no local blocks")
        #expect(library.content.size(of: ids["a"]!) == nil, "the evicted data is still on the local disk")
        #expect(try f.store.read(ids["a"]!) == data["a"]!, "the fetched data is not the original")
        #expect(try library.attributes(of: ids["a"]!).isRemoteOnly == false)
        f.store.library.stopRemoteSync()
        f.store.close()
        let problems = try StoreChecker(location: f.store.location).check(repair: false)
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test("a wrong object in the bucket is EIO on open and is never taken for the data")
    func wrongObject() throws {
        let f = try RemoteFixture(cacheSize: 0)
        let id = try f.store.createFile(TestStore.roll, "x.jpg", contents: bytes("the real photo"))
        try f.start()
        try f.synced()
        eventually("evicted") { f.storage(id) == "remote" }
        // Overwritten behind albumfs' back.
        try f.bucket.put(RemoteFixture.key(bytes("the real photo")), bytes: bytes("something else!"))
        #expect { try f.store.library.open(id, writable: false, truncate: false) } throws: { error in
            guard case LibraryError.remote(let why) = error else { return false }
            return why.contains("asset \(id)")
        }
        #expect(f.storage(id) == "remote")
        #expect(f.store.library.content.size(of: id) == nil)
        f.store.library.stopRemoteSync()
    }

    @Test("a remote-only original fails fast (EIO) when the store does not answer; pinning one fetches it and keeps it local")
    func unreachableFetchAndPin() throws {
        let f = try RemoteFixture(cacheSize: 0)
        let a = try f.store.createFile(TestStore.roll, "a.jpg", contents: bytes("photo a"))
        let b = try f.store.createFile(TestStore.roll, "b.jpg", contents: bytes("photo b"))
        try f.start()
        try f.synced()
        eventually("both evicted") { f.storage(a) == "remote" && f.storage(b) == "remote" }
        f.store.library.stopRemoteSync()
        var library = try f.store.reopen()
        library.startRemoteSync(try S3ObjectBackend(location: RemoteLocation(url: f.remote.url, endpoint: "http://127.0.0.1:9"),
                                                    credentials: gateway!.credentials))
        let started = Date()
        #expect { try library.open(a, writable: false, truncate: false) } throws: { error in
            if case LibraryError.remote = error { return true }
            return false
        }
        #expect(Date().timeIntervalSince(started) < 15, "a refused connection took more than the bound")
        #expect(try library.attributes(of: a).size == 7, "stat works offline")
        library.stopRemoteSync()
        library = try f.store.reopen()
        try f.start()
        try library.setExtendedAttribute(b, Array("user.albumfs.keep".utf8), bytes("1"), mode: .createOrReplace)
        #expect(f.storage(b) == "both")
        #expect(try library.extendedAttribute(b, Array("user.albumfs.keep".utf8)) == bytes("1"))
        _ = try library.evictOverCacheSize()
        #expect(f.storage(b) == "both", "a pinned original was evicted")
        library.stopRemoteSync()
    }
}
