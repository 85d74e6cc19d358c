#if canImport(Glibc)
import Glibc
#endif
import Digests
import Foundation
import Testing
@testable import AlbumCore
import ObjectStore
import Synchronization

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

    @Test("an object stored by an upload whose asset was purged before the upload was recorded is deleted, not left unknown")
    func purgedDuringUpload() throws {
        let f = try RemoteFixture(trashDays: 0)
        let pause = PausedStore(try f.backend())
        f.store.library.startRemoteSync(pause)
        try f.store.createFile(TestStore.roll, "a.jpg", contents: bytes("purged while it went up"))
        // A pause point in the uploader: the PUT is about to go.
        #expect(pause.entered.wait(timeout: .now() + 30) == .success, "the upload never began")
        try f.store.unlink(TestStore.roll, "a.jpg")   // trash_days=0: purged at once
        pause.proceed.signal()
        let key = RemoteFixture.key(bytes("purged while it went up"))
        #expect(pause.stored.wait(timeout: .now() + 30) == .success)
        eventually("the object nothing needs deleted") { try f.bucket.head(key) == nil }
        #expect(try f.store.library.read { db in try db.scalarInt("SELECT count(*) FROM uploads_under_way") } == 0)
        f.store.library.stopRemoteSync()
    }

    @Test("an upload stored but never recorded (the mount ended first, as a crash does) owes its object a delete when its asset is purged")
    func storedThenStoppedThenPurged() throws {
        let f = try RemoteFixture(trashDays: 0)
        let pause = PausedStore(try f.backend())
        f.store.library.startRemoteSync(pause)
        try f.store.createFile(TestStore.roll, "a.jpg", contents: bytes("stored, never recorded"))
        #expect(pause.entered.wait(timeout: .now() + 30) == .success, "the upload never began")
        // The mount ends while the PUT is under way: its result is never recorded.
        f.store.library.stopRemoteSync(timeout: 0.1)
        pause.proceed.signal()
        #expect(pause.stored.wait(timeout: .now() + 30) == .success)
        let key = RemoteFixture.key(bytes("stored, never recorded"))
        #expect(try f.bucket.head(key) != nil, "the PUT did not store the object")
        let library = try f.store.reopen(options: LibraryOptions(trashDays: 0))
        try f.store.unlink(TestStore.roll, "a.jpg")   // purged before any upload ran again
        try f.start()
        eventually("the object nothing needs deleted") { try f.bucket.head(key) == nil }
        library.stopRemoteSync()
    }

    @Test("an empty original evicted by hand reads back empty (no chunk to fetch); the cache bound never evicts one")
    func emptyOriginal() throws {
        let f = try RemoteFixture(cacheSize: 0)
        let empty = try f.store.createFile(TestStore.roll, "empty.jpg", contents: [])
        let full = try f.store.createFile(TestStore.roll, "full.jpg", contents: bytes("not empty"))
        try f.start()
        try f.synced()
        eventually("the non-empty one evicted") { f.storage(full) == "remote" }
        #expect(f.storage(empty) == "both", "an empty original was evicted: nothing to gain")
        f.store.library.stopRemoteSync()
        #expect(try f.store.library.evict(empty))
        try f.start()
        #expect(try f.store.read(empty) == [])
        #expect(try f.store.read(full) == bytes("not empty"))
        f.store.library.stopRemoteSync()
    }

    @Test("a side file renamed into a photo (rsync's and editors' .x.tmp -> x.jpg) is uploaded as the asset it became")
    func sideFileBecomesAsset() throws {
        let f = try RemoteFixture()
        try f.start()
        let album = try f.store.makeAlbum("Trip")
        let temporary = try f.store.createFile(album, ".x.jpg.1234.tmp", contents: bytes("saved by an editor"))
        try f.synced()
        #expect(try f.store.library.attributes(of: temporary).kind == .sideFile)
        #expect(try f.bucket.head(RemoteFixture.key(bytes("saved by an editor"))) == nil, "a side file was uploaded")
        try f.store.rename(album, ".x.jpg.1234.tmp", to: album, "x.jpg")
        try f.synced()
        #expect(f.storage(temporary) == "both", "\(String(describing: f.store.library.lastRemoteError))")
        #expect(try f.bucket.get(RemoteFixture.key(bytes("saved by an editor"))) == bytes("saved by an editor"))
        f.store.library.stopRemoteSync()
    }

    @Test("an asset whose local data is missing is taken off the queue, said once, and holds up no upload behind it")
    func missingDataDoesNotBlockTheQueue() throws {
        let f = try RemoteFixture()
        let lost = try f.store.createFile(TestStore.roll, "lost.jpg", contents: bytes("lost"))
        try f.store.createFile(TestStore.roll, "after.jpg", contents: bytes("after"))
        #expect(unlink(f.store.library.content.path(of: lost)) == 0)
        try f.start()
        try f.synced()
        #expect(try f.bucket.get(RemoteFixture.key(bytes("after"))) == bytes("after"))
        f.store.library.stopRemoteSync()
    }

    @Test("the cache bound never evicts an asset between an open's fetch and its registration, nor a truncate's fetch and its cut")
    func noEvictionDuringOpen() throws {
        let f = try RemoteFixture()
        let id = try f.store.createFile(TestStore.roll, "x.jpg", contents: bytes("being overwritten"))
        try f.start()
        try f.synced()
        f.store.library.stopRemoteSync()
        let library = f.store.library
        // The pause point between the open's fetch (and content open) and its registration.
        let evicted = Mutex<[Bool]>([])
        library.pausePoints.install { point throws(LibraryError) in
            guard point == .openBeforeRegister else { return }
            let done = try library.evict(id)
            evicted.withLock { $0.append(done) }
        }
        let file = try library.open(id, writable: true, truncate: true)
        library.pausePoints.install(nil)
        #expect(evicted.withLock { $0 } == [false], "the asset was evicted from under an open for writing")
        let version = bytes("the new version")
        _ = try version.withUnsafeBytes { raw in try library.write(file, from: raw.baseAddress!, count: raw.count, at: 0) }
        try library.flush(file)
        try library.release(file)
        #expect(try f.store.read(id) == bytes("the new version"))
        #expect(library.dataHeld.withLock { $0.isEmpty }, "a hold was not released")
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
        // stats reads the failure, and how long the oldest upload waits, from the database alone.
        let failing = try StoreStatistics.read(f.store.location)
        #expect(failing.lastRemoteError?.contains("unreachable") == true && failing.lastRemoteErrorTime != nil)
        #expect(failing.oldestUploadQueued.map { abs($0 - currentTime()) < 600_000_000_000 } == true)
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
        eventually("the failure cleared once a step worked") { try StoreStatistics.read(f.store.location).lastRemoteError == nil }
        #expect(try StoreStatistics.read(f.store.location).oldestUploadQueued == nil)
        library.stopRemoteSync()
    }


    @Test("files closed while the store fails do not cut the uploader's pause short: no burst of retries, so no minute-long pause once it answers")
    func backoffIgnoresNewWork() throws {
        let f = try RemoteFixture()
        let refusing = RefusingStore()
        f.store.library.startRemoteSync(refusing)
        defer { f.store.library.stopRemoteSync() }
        try f.store.createFile(TestStore.roll, "first.jpg", contents: bytes("first"))
        // Pause point: the first PUT waits until 30 more files (30 wake-ups) are queued.
        #expect(refusing.entered.wait(timeout: .now() + 30) == .success)
        for i in 0..<30 { try f.store.createFile(TestStore.roll, "n\(i).jpg", contents: bytes("new \(i)")) }
        refusing.proceed.signal()
        eventually("the first attempt failing") { f.store.library.lastRemoteError != nil }
        // The next attempt is a second after the first failure (then 2, 4, ... s): within
        // half a second there is no other, however many files were closed.
        usleep(500_000)
        #expect(refusing.attempts.withLock { $0 } <= 2, "the uploader retried once per file closed while the store failed")
    }

    @Test("uploads wait for writes to settle (here 60 s), and start at once when someone waits for them (sync --wait reads the root's user.albumfs.uploading)")
    func uploadsWaitForWritesToSettle() throws {
        let f = try RemoteFixture(uploadSettle: 60)
        let settling = DispatchSemaphore(value: 0)
        f.store.library.pausePoints.install { point throws(LibraryError) in if point == .uploadsSettling { settling.signal() } }
        try f.start()
        defer { f.store.library.stopRemoteSync() }
        let id = try f.store.createFile(TestStore.roll, "a.jpg", contents: bytes("settling"))
        // The uploader woke for the file and chose to wait (60 s) for the writes to settle.
        #expect(settling.wait(timeout: .now() + 30) == .success, "the uploader did not wait for writes to settle")
        #expect(f.storage(id) == "uploading", "uploaded while writes were still settling")
        #expect(try f.store.library.extendedAttribute(TestStore.root, Array("user.albumfs.uploading".utf8)) == Array("1".utf8))
        // That read is sync --wait's: the upload starts now, not 60 s after the write (nor 30 s
        // after, when a deferral ends however busy the writers are).
        try f.synced(timeout: 20)
        #expect(f.storage(id) == "both")
    }

    @Test("an original fetched back over the cache bound is evicted again once it is closed, not at the uploader's next idle look 30 s later")
    func evictedAgainAfterClose() throws {
        let f = try RemoteFixture()
        let data = [UInt8](repeating: 7, count: 1000)
        let id = try f.store.createFile(TestStore.roll, "a.jpg", contents: data)
        try f.start()
        try f.synced()
        f.store.library.stopRemoteSync()
        var options = LibraryOptions()
        options.cacheSize = 0
        let library = try f.store.reopen(options: options)
        try f.start()
        eventually("evicted") { f.storage(id) == "remote" }
        #expect(try f.store.read(id) == data)   // fetched back whole, then closed
        eventually("evicted again after the close", timeout: 10) { f.storage(id) == "remote" }
        library.stopRemoteSync()
    }

    @Test("an original whose facts (and thumbnail) are not read yet is not evicted, so that reading them never downloads it")
    func evictedOnlyAfterFacts() throws {
        let f = try RemoteFixture()
        let reader = GatedReader()
        var options = LibraryOptions(factsReader: reader)
        options.cacheSize = 0
        let library = try f.store.reopen(options: options)
        let id = try f.store.createFile(TestStore.roll, "a.jpg", contents: bytes("kind=photo\nthumb=a"))
        #expect(reader.began.wait(timeout: .now() + 10) == .success, "the facts read did not start")
        try f.start()
        try f.synced()
        // Uploaded, and the cache bound is 0: still local while its facts are being read.
        #expect(try library.evictOverCacheSize() == 0)
        #expect(f.storage(id) == "both")
        for _ in 0..<8 { reader.gate.signal() }   // (this read, and any the indexer makes again)
        #expect(library.waitForIndexing(timeout: 10))
        #expect(try library.thumbnail(of: id) != nil)
        eventually("evicted once its facts are read") { _ = try library.evictOverCacheSize(); return f.storage(id) == "remote" }
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
        let stats = try StoreStatistics.read(f.store.location)
        #expect(stats.remoteOnlyAssets == 2 && stats.remoteOnlyBytes == 200 && stats.localBytes == 100, "\(stats)")
        #expect(try f.store.read(ids["a"]!) == data["a"]!, "the fetched data is not the original")
        // Installed once every chunk came and was checked, after the read (eventual).
        eventually("the fetched original installed") { try library.attributes(of: ids["a"]!).isRemoteOnly == false }
        f.store.library.stopRemoteSync()
        f.store.close()
        let problems = try StoreChecker(location: f.store.location).check(repair: false)
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test("a wrong object in the bucket is EIO on read, logged with the asset, and is never taken for the data")
    func wrongObject() throws {
        let log = Mutex<[String]>([])
        let f = try RemoteFixture(cacheSize: 0, log: { line in log.withLock { $0.append(line) } })
        let id = try f.store.createFile(TestStore.roll, "x.jpg", contents: bytes("the real photo"))
        try f.start()
        try f.synced()
        eventually("evicted") { f.storage(id) == "remote" }
        // Overwritten behind albumfs' back.
        try f.bucket.put(RemoteFixture.key(bytes("the real photo")), bytes: bytes("something else"))
        #expect { try f.store.read(id) } throws: { error in
            guard case LibraryError.unavailable(let why) = error else { return false }
            return why.contains("asset \(id)") && why.contains("other data")
        }
        #expect(log.withLock { $0 }.filter { $0.contains("asset \(id)") }.count == 1, "\(log.withLock { $0 })")
        eventually("the failed download forgotten") { f.storage(id) == "remote" }
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
        #expect { try f.store.read(a) } throws: { error in
            if case LibraryError.unavailable(let why) = error { return why.contains("unreachable") }
            return false
        }
        #expect(Date().timeIntervalSince(started) < 15, "a refused connection took more than the bound")
        #expect(try library.attributes(of: a).size == 7, "stat works offline")
        library.stopRemoteSync()
        library = try f.store.reopen()
        try f.start()
        try library.setExtendedAttribute(b, Array("user.albumfs.keep".utf8), bytes("1"), mode: .createOrReplace)
        eventually("the pinned original fetched") { f.storage(b) == "both" }
        #expect(try library.extendedAttribute(b, Array("user.albumfs.keep".utf8)) == bytes("1"))
        _ = try library.evictOverCacheSize()
        #expect(f.storage(b) == "both", "a pinned original was evicted")
        library.stopRemoteSync()
    }
}

/// A test's bucket that steps in on the originals and passes the named
/// objects (snapshots, companions) straight to the real one.
protocol ForwardingBackend: ObjectBackend {
    var inner: S3ObjectBackend { get }
}

extension ForwardingBackend {
    func put(_ key: String, file descriptor: Int32, length: Int64) throws { try inner.put(key, file: descriptor, length: length) }
    func put(_ key: String, bytes: [UInt8]) throws { try inner.put(key, bytes: bytes) }
    func get(_ key: String, into descriptor: Int32) throws -> Int64 { try inner.get(key, into: descriptor) }
    func get(_ key: String) throws -> [UInt8]? { try inner.get(key) }
    func getForReader(_ key: String) throws -> [UInt8]? { try inner.getForReader(key) }
    func list(_ prefix: String) throws -> [ListedObject] { try inner.list(prefix) }
    func remove(_ key: String) throws { try inner.remove(key) }
    // The originals too, unless the test's bucket steps in.
    func store(_ descriptor: Int32, length: Int64, sha256: String) throws -> String {
        try inner.store(descriptor, length: length, sha256: sha256)
    }
    func remove(sha256: String) throws { try inner.remove(sha256: sha256) }
    func fetch(sha256: String, range: Range<Int64>, into descriptor: Int32,
               observing observe: (UnsafeRawBufferPointer) -> Bool) throws -> Int64 {
        try inner.fetch(sha256: sha256, range: range, into: descriptor, observing: observe)
    }
    func head(sha256: String) throws -> (size: Int64, etag: String)? { try inner.head(sha256: sha256) }
    func objects() throws -> [(sha256: String, size: Int64, etag: String)] { try inner.objects() }
}

/// The bucket with a pause point before the first store: `entered` is
/// signalled there, and the store goes on once the test signals `proceed`;
/// `stored` once it is done.
final class PausedStore: ForwardingBackend, @unchecked Sendable {
    let inner: S3ObjectBackend
    let entered = DispatchSemaphore(value: 0), proceed = DispatchSemaphore(value: 0), stored = DispatchSemaphore(value: 0)
    private let first = Mutex(true)

    init(_ inner: S3ObjectBackend) { self.inner = inner }

    func store(_ descriptor: Int32, length: Int64, sha256: String) throws -> String {
        if first.withLock({ first in defer { first = false }; return first }) {
            entered.signal()
            _ = proceed.wait(timeout: .now() + 60)
            defer { stored.signal() }
            return try inner.store(descriptor, length: length, sha256: sha256)
        }
        return try inner.store(descriptor, length: length, sha256: sha256)
    }
}

/// A store that refuses every upload (as an unreachable one does), counting
/// the attempts; a pause point before the first: `entered`, then `proceed`.
private final class RefusingStore: ObjectBackend, @unchecked Sendable {
    let entered = DispatchSemaphore(value: 0), proceed = DispatchSemaphore(value: 0)
    let attempts = Mutex(0)

    func store(_ descriptor: Int32, length: Int64, sha256: String) throws -> String {
        if attempts.withLock({ count in count += 1; return count }) == 1 {
            entered.signal()
            _ = proceed.wait(timeout: .now() + 60)
        }
        throw ObjectStoreError.unreachable("refused by the test")
    }
    func remove(sha256: String) throws { throw ObjectStoreError.unreachable("refused by the test") }
    func fetch(sha256: String, range: Range<Int64>, into descriptor: Int32,
               observing observe: (UnsafeRawBufferPointer) -> Bool) throws -> Int64 {
        throw ObjectStoreError.unreachable("refused by the test")
    }
    func head(sha256: String) throws -> (size: Int64, etag: String)? { throw ObjectStoreError.unreachable("refused by the test") }
    func objects() throws -> [(sha256: String, size: Int64, etag: String)] { throw ObjectStoreError.unreachable("refused by the test") }
    func put(_ key: String, file descriptor: Int32, length: Int64) throws { throw ObjectStoreError.unreachable("refused by the test") }
    func put(_ key: String, bytes: [UInt8]) throws { throw ObjectStoreError.unreachable("refused by the test") }
    func get(_ key: String, into descriptor: Int32) throws -> Int64 { throw ObjectStoreError.unreachable("refused by the test") }
    func get(_ key: String) throws -> [UInt8]? { throw ObjectStoreError.unreachable("refused by the test") }
    func list(_ prefix: String) throws -> [ListedObject] { throw ObjectStoreError.unreachable("refused by the test") }
    func remove(_ key: String) throws { throw ObjectStoreError.unreachable("refused by the test") }
}

/// The bucket behind a gate the test holds shut: bytes at or past
/// `openBelow` come only after `release()` (a pause point in a download); a
/// fetch of a range across it gets the bytes below first, then waits.
final class GatedBackend: ForwardingBackend, @unchecked Sendable {
    let inner: S3ObjectBackend
    let openBelow: Int64
    private let gate = DispatchSemaphore(value: 0)
    let fetched = Mutex<[Range<Int64>]>([])

    init(_ inner: S3ObjectBackend, openBelow: Int64) { (self.inner, self.openBelow) = (inner, openBelow) }

    func release() { gate.signal() }

    func fetch(sha256: String, range: Range<Int64>, into descriptor: Int32,
               observing observe: (UnsafeRawBufferPointer) -> Bool) throws -> Int64 {
        fetched.withLock { $0.append(range) }
        var below: Int64 = 0
        if range.lowerBound < openBelow {
            let open = range.lowerBound..<min(range.upperBound, openBelow)
            below = try inner.fetch(sha256: sha256, range: open, into: descriptor, observing: observe)
            guard below == open.count, open.upperBound < range.upperBound else { return below }
        }
        gate.wait()
        gate.signal()   // and every later one
        return try below + inner.fetch(sha256: sha256, range: max(range.lowerBound, openBelow)..<range.upperBound,
                                       into: descriptor, observing: observe)
    }
}

@Suite("Remote storage: reading originals that are only in the bucket", .serialized,
       .enabled(if: gateway != nil, "needs RADOSGW_ENDPOINT and keys: scripts/test starts one"))
struct RemoteReadTests {
    static let chunk = Int(ObjectDigest.chunkSize)

    /// 3¼ chunks, every 4 KiB marked, so a chunk out of place shows.
    static let video: [UInt8] = (0..<(3 * chunk + chunk / 4)).map { UInt8(truncatingIfNeeded: $0 / 4096 &* 7 &+ $0 % 251) }

    /// A store whose one large asset was uploaded and evicted, then reopened
    /// with the remote behind `gate` (held shut past the first chunk).
    fileprivate static func evictedVideo(timeout: Double = 10, log: @escaping @Sendable (String) -> Void = { _ in })
        throws -> (RemoteFixture, NodeID, GatedBackend) {
        let f = try RemoteFixture(cacheSize: 0, log: log)
        let id = try f.store.createFile(TestStore.roll, "clip.mov", contents: video)
        try f.start()
        try f.synced()
        eventually("evicted") { f.storage(id) == "remote" }
        f.store.library.stopRemoteSync()
        // Reopened with no cache bound: what a read brings back stays (with
        // cache_size=0 the uploader would evict it again once closed).
        var options = LibraryOptions()
        options.remoteTimeout = timeout
        options.log = log
        let library = try f.store.reopen(options: options)
        let gate = GatedBackend(try f.backend(), openBelow: ObjectDigest.chunkSize)
        library.startRemoteSync(gate)
        return (f, id, gate)
    }

    static func read(_ library: Library, _ file: OpenFile, _ range: Range<Int>) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: range.count)
        let n = try buffer.withUnsafeMutableBytes { try library.read(file, into: $0.baseAddress!, count: range.count, at: Int64(range.lowerBound)) }
        return Array(buffer[..<n])
    }

    /// SEMANTICS.md § Remote storage, `cache_size`: an original larger than
    /// the bound is read from the bucket and not kept (installed, it could
    /// only be evicted again once closed: the cache stood above its bound
    /// meanwhile, 512 MiB over 64 MiB for 0.7 s in W8e); pinned, or fetched
    /// for a writer, it is kept.
    @Test("an original larger than cache_size is read whole from the bucket and not kept: readers read on, storage stays remote; pinned or written, it is kept")
    func largerThanTheCacheIsNotKept() throws {
        let f = try RemoteFixture(cacheSize: Int64(Self.chunk))
        let id = try f.store.createFile(TestStore.roll, "clip.mov", contents: Self.video)
        let pinned = try f.store.createFile(TestStore.roll, "pinned.mov", contents: Array(Self.video.reversed()))
        let written = try f.store.createFile(TestStore.roll, "written.mov", contents: Array(Self.video.prefix(2 * Self.chunk)))
        try f.start()
        try f.synced()
        eventually("all three evicted") { [id, pinned, written].allSatisfy { f.storage($0) == "remote" } }
        let library = f.store.library
        let file = try library.open(id, writable: false, truncate: false)
        #expect(try Self.read(library, file, 0..<Self.video.count) == Self.video)
        eventually("the download ended") { file.download?.outcome != nil }
        #expect(file.download?.outcome == .discarded)
        #expect(f.storage(id) == "remote")
        #expect(library.content.size(of: id) == nil, "the data was kept")
        #expect(access(library.content.fetchPath(of: id), F_OK) != 0, "the fetch file was left")
        // The handle reads on from what came; a new open fetches again.
        #expect(try Self.read(library, file, (3 * Self.chunk)..<Self.video.count) == Array(Self.video[(3 * Self.chunk)...]))
        try library.release(file)
        #expect(try f.store.read(id) == Self.video)
        // Pinned: fetched and kept.
        try library.setKeptLocal(pinned, true)
        eventually("the pinned one kept") { f.storage(pinned) == "both" }
        // Opened for writing: fetched whole and kept (the content directory is where data is written).
        let writer = try library.open(written, writable: true, truncate: false)
        #expect(library.content.size(of: written) == Int64(2 * Self.chunk))
        try library.release(writer)
        #expect(try f.store.read(pinned) == Array(Self.video.reversed()))
        library.stopRemoteSync()
    }

    @Test("the first bytes of a remote-only original are served from the first chunk, before the rest has come; then all of it, checked, stays local")
    func servedAsItArrives() throws {
        let (f, id, gate) = try Self.evictedVideo()
        let library = f.store.library
        let file = try library.open(id, writable: false, truncate: false)
        #expect(file.isArriving, "an arriving original must be read through the library, not handed to the kernel")
        // Only the first chunk can come: the gate holds the rest.
        #expect(try Self.read(library, file, 0..<65_536) == Array(Self.video[0..<65_536]))
        #expect(f.storage(id) == "downloading")
        let progress = String(decoding: try library.extendedAttribute(id, Array("user.albumfs.progress".utf8)), as: UTF8.self)
        #expect(progress.hasSuffix("/\(Self.video.count)"), "\(progress)")
        gate.release()
        #expect(try Self.read(library, file, (2 * Self.chunk + 5)..<(2 * Self.chunk + 70_000))
                == Array(Self.video[(2 * Self.chunk + 5)..<(2 * Self.chunk + 70_000)]))
        #expect(try Self.read(library, file, 0..<Self.video.count + 10) == Self.video)
        try library.release(file)
        eventually("installed") { f.storage(id) == "both" }
        #expect(library.content.size(of: id) == Int64(Self.video.count))
        // Each byte asked for once, in ranged GETs of whole chunks, at most chunksPerGet of them.
        let ranges = gate.fetched.withLock { $0 }.sorted { $0.lowerBound < $1.lowerBound }
        #expect(ranges.allSatisfy { $0.lowerBound % ObjectDigest.chunkSize == 0
                                    && $0.count <= Int64(Download.chunksPerGet) * ObjectDigest.chunkSize }, "\(ranges)")
        #expect(ranges.first?.lowerBound == 0 && ranges.last?.upperBound == Int64(Self.video.count)
                && zip(ranges, ranges.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound }, "\(ranges)")
        // The first GET is of one chunk: a larger one is slower to start, and a reader waits for it.
        #expect(ranges.first == 0..<ObjectDigest.chunkSize, "\(ranges)")
        library.stopRemoteSync()
        f.store.close()
        let problems = try StoreChecker(location: f.store.location).check(repair: false)
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test("the end of a mount waits for a download under way to stop (none is left fetching into a process that exits), bounded by its timeout")
    func stopWaitsForDownloads() throws {
        let (f, id, gate) = try Self.evictedVideo()
        let library = f.store.library
        let file = try library.open(id, writable: false, truncate: false)
        #expect(try Self.read(library, file, 0..<4096) == Array(Self.video[0..<4096]))
        // Its other chunks' fetchers are held in the backend (the gate) until the uploader has
        // stopped; then they go on, and the end of the mount must wait for them.
        library.pausePoints.install { point throws(LibraryError) in if point == .remoteSyncStopped { gate.release() } }
        library.stopRemoteSync(timeout: 20)
        #expect(library.downloadWorkers.wait(timeout: .now()) == .success, "the mount ended with a download still fetching")
        try? library.release(file)
    }

    @Test("a read waits at most remote_timeout while nothing comes, then fails (EIO), and the mount goes on")
    func boundedWait() throws {
        let (f, id, gate) = try Self.evictedVideo(timeout: 1)
        let library = f.store.library
        let file = try library.open(id, writable: false, truncate: false)
        #expect(try Self.read(library, file, 0..<100) == Array(Self.video[0..<100]))
        let started = Date()
        #expect { try Self.read(library, file, Self.chunk..<(Self.chunk + 10)) } throws: { error in
            if case LibraryError.remote(let why) = error { return why.contains("remote_timeout") }
            return false
        }
        #expect(Date().timeIntervalSince(started) < 10, "the wait was not bounded")
        #expect(try library.attributes(of: id).size == Int64(Self.video.count))
        #expect(try Self.read(library, file, 0..<100) == Array(Self.video[0..<100]), "a chunk that came stops being readable")
        gate.release()
        try library.release(file)
        library.stopRemoteSync()
    }

    @Test("a chunk that is not what the library recorded is EIO, logged once; the chunks before it still read right, and nothing is installed")
    func wrongChunk() throws {
        let log = Mutex<[String]>([])
        let (f, id, gate) = try Self.evictedVideo(log: { line in log.withLock { $0.append(line) } })
        var other = Self.video
        other[2 * Self.chunk + 100] ^= 0xff
        try f.bucket.put(RemoteFixture.key(Self.video), bytes: other)
        let library = f.store.library
        let file = try library.open(id, writable: false, truncate: false)
        #expect(try Self.read(library, file, 0..<4096) == Array(Self.video[0..<4096]))
        gate.release()
        // Chunk 1 comes (asked for first: the order is the test's, not the worker's), then chunk 2 fails.
        #expect(try Self.read(library, file, Self.chunk..<(Self.chunk + 4096)) == Array(Self.video[Self.chunk..<(Self.chunk + 4096)]))
        #expect { try Self.read(library, file, (2 * Self.chunk)..<(2 * Self.chunk + 4096)) } throws: { error in
            guard case LibraryError.unavailable(let why) = error else { return false }
            return why.contains("asset \(id)") && why.contains("other data")
        }
        #expect(try Self.read(library, file, Self.chunk..<(Self.chunk + 4096)) == Array(Self.video[Self.chunk..<(Self.chunk + 4096)]))
        try library.release(file)
        eventually("the failed download forgotten") { f.storage(id) == "remote" }
        #expect(library.content.size(of: id) == nil)
        #expect(log.withLock { $0 }.filter { $0.contains("asset \(id)") }.count == 1, "\(log.withLock { $0 })")
        library.stopRemoteSync()
    }

    @Test("an object recorded without chunk digests is checked whole before any of it is read")
    func checkedWhole() throws {
        let (f, id, gate) = try Self.evictedVideo(timeout: 1)
        let library = f.store.library
        try library.write { db in try db.execute("UPDATE remote_objects SET chunk_sha256 = NULL") }
        let file = try library.open(id, writable: false, truncate: false)
        // The first chunk comes, but unchecked it is not served: the wait runs out.
        #expect { try Self.read(library, file, 0..<100) } throws: { error in
            if case LibraryError.remote(let why) = error { return why.contains("remote_timeout") }
            return false
        }
        gate.release()
        #expect(try Self.read(library, file, 0..<Self.video.count) == Self.video)
        try library.release(file)
        eventually("installed") { f.storage(id) == "both" }
        library.stopRemoteSync()
    }
}
