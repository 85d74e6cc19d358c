#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import AlbumCore
import ObjectStore

/// `albumfs fsck --remote` (SEMANTICS.md § Remote storage, "Checking the
/// bucket"): against a real RADOS Gateway, with the bucket changed behind
/// the library's back by the test's own S3 client.
@Suite("Remote storage: fsck --remote", .serialized,
       .enabled(if: gateway != nil, "needs RADOSGW_ENDPOINT and keys: scripts/test starts one"))
struct RemoteCheckerTests {
    /// A store whose photos `a`, `b` (same content as `a`) and `c` are
    /// uploaded; `c` evicted (only in the bucket). Closed, as fsck wants it.
    private func uploaded() throws -> (RemoteFixture, [String: NodeID]) {
        let f = try RemoteFixture()
        var ids: [String: NodeID] = [:]
        for (name, text) in [("a", "photo a"), ("b", "photo a"), ("c", "photo c")] {
            ids[name] = try f.store.createFile(TestStore.roll, "\(name).jpg", contents: bytes(text))
        }
        try f.start()
        try f.synced()
        f.store.library.stopRemoteSync()
        // Evicted as the cache bound would: its data only in the bucket.
        #expect(try f.store.library.evict(ids["c"]!))
        #expect(f.store.library.content.size(of: ids["c"]!) == nil)
        f.store.close()
        return (f, ids)
    }

    private func check(_ f: RemoteFixture, repair: Bool = false) throws -> RemoteChecker.Report {
        try RemoteChecker(location: f.store.location).check(try f.backend(), repair: repair)
    }

    @Test("a bucket as recorded is clean: one HEAD per object (twins share one), nothing unknown")
    func clean() throws {
        let (f, _) = try uploaded()
        let report = try check(f)
        #expect(report.problems.isEmpty, "\(report.problems)")
        #expect(report.checked == 2)
    }

    @Test("a missing object with a local copy is uploaded again by --repair; one only in the bucket is reported, not repairable")
    func missing() throws {
        let (f, ids) = try uploaded()
        try f.bucket.delete(RemoteFixture.key(bytes("photo a")))
        try f.bucket.delete(RemoteFixture.key(bytes("photo c")))
        let report = try check(f)
        #expect(report.problems.count == 2, "\(report.problems)")
        let a = try #require(report.problems.first { $0.description.contains("asset \(ids["a"]!)") })
        #expect(a.description.contains("is missing") && a.description.contains("a.jpg") && a.repair != nil)
        let c = try #require(report.problems.first { $0.description.contains("asset \(ids["c"]!)") })
        #expect(c.repair == nil && (c.whyNotRepaired ?? "").contains("only in the bucket"))
        // Checking changes nothing.
        #expect(try f.bucket.head(RemoteFixture.key(bytes("photo a"))) == nil)
        let repaired = try check(f, repair: true)
        #expect(repaired.problems.count == 2)
        #expect(try f.bucket.get(RemoteFixture.key(bytes("photo a"))) == bytes("photo a"))
        let after = try check(f)
        #expect(after.problems.count == 1 && after.problems[0].description.contains("asset \(ids["c"]!)"), "\(after.problems)")
    }

    @Test("an object overwritten behind albumfs's back, even with as many bytes, is found by its ETag and replaced from the local copy")
    func overwritten() throws {
        let (f, ids) = try uploaded()
        try f.bucket.put(RemoteFixture.key(bytes("photo a")), bytes: bytes("photo A"))
        let report = try check(f)
        #expect(report.problems.count == 1, "\(report.problems)")
        #expect(report.problems.first?.description.contains("overwritten") == true)
        #expect(report.problems.first?.description.contains("asset \(ids["a"]!)") == true)
        _ = try check(f, repair: true)
        #expect(try f.bucket.get(RemoteFixture.key(bytes("photo a"))) == bytes("photo a"))
        #expect(try check(f).problems.isEmpty, "the repair did not record the new ETag")
    }

    @Test("objects the library does not know are listed and never deleted, not even by --repair; deletes owed are a note")
    func unknown() throws {
        let (f, _) = try uploaded()
        let stranger = RemoteFixture.key(bytes("someone else's photo"))
        try f.bucket.put(stranger, bytes: bytes("someone else's photo"))
        try f.bucket.put("objects/not-a-content-name", bytes: bytes("x"))
        let report = try check(f, repair: true)
        #expect(report.problems.count == 1, "\(report.problems)")
        #expect(report.problems.first?.repair == nil)
        #expect(report.problems.first?.description.contains(FileDigest.sha256(of: bytes("someone else's photo"))) == true)
        #expect(try f.bucket.head(stranger) != nil, "fsck deleted an object")
    }

    @Test("an object stored by an upload the mount ended before recording it (a crash) is a note, not an unknown object")
    func storedNotRecorded() throws {
        let f = try RemoteFixture()
        let pause = PausedStore(try f.backend())
        f.store.library.startRemoteSync(pause)
        try f.store.createFile(TestStore.roll, "a.jpg", contents: bytes("stored, not recorded"))
        #expect(pause.entered.wait(timeout: .now() + 30) == .success, "the upload never began")
        f.store.library.stopRemoteSync(timeout: 0.1)
        pause.proceed.signal()
        #expect(pause.stored.wait(timeout: .now() + 30) == .success)
        #expect(try f.bucket.head(RemoteFixture.key(bytes("stored, not recorded"))) != nil)
        f.store.close()
        let report = try check(f)
        #expect(report.problems.isEmpty, "\(report.problems.map(\.description))")
        #expect(report.notes.contains { $0.hasPrefix("1 object stored by an upload a crash cut short") }, "\(report.notes)")
    }

    @Test("an unreachable bucket is an error, never a verdict on the objects")
    func unreachable() throws {
        let (f, _) = try uploaded()
        let nowhere = try S3ObjectBackend(location: RemoteLocation(url: f.remote.url, endpoint: "http://127.0.0.1:9"),
                                          credentials: gateway!.credentials)
        #expect { try RemoteChecker(location: f.store.location).check(nowhere, repair: true) } throws: { error in
            if case LibraryError.remote = error { return true }
            return false
        }
    }
}
