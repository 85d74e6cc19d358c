#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import Testing
@testable import AlbumCore
import ObjectStore
import Synchronization

@Suite("One writer: the lease on the bucket (SEMANTICS.md § Surviving the machine)", .serialized,
       .enabled(if: gateway != nil, "needs RADOSGW_ENDPOINT and keys: scripts/test starts one"))
struct LeaseTests {
    /// A bucket of the test's own, and a backend on it.
    static func bucket() throws -> (S3ObjectBackend, String) {
        let gateway = try #require(gateway)
        let name = "l" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        let url = "s3://\(name)/lib"
        let backend = try S3ObjectBackend(location: RemoteLocation(url: url, endpoint: gateway.endpoint), credentials: gateway.credentials)
        try backend.createBucket()
        return (backend, url)
    }

    @Test("radosgw honours conditional PUTs (the probe a mount makes)")
    func probe() throws {
        let (backend, _) = try Self.bucket()
        #expect(try backend.probeConditionalPut("lease-probe"))
        #expect(try backend.get("lease-probe") == nil, "the probe's object is removed")
    }

    @Test("a second store is refused while the first holds the lease, with the holder's host and expiry; released, it is free")
    func secondWriterRefused() throws {
        let (backend, url) = try Self.bucket()
        let first = Lease(bucket: backend, url: url, holder: "a", duration: 60)
        try first.acquire()
        #expect(first.mayWrite() == nil)
        let second = Lease(bucket: backend, url: url, holder: "b", duration: 60)
        let refusal = #expect(throws: Lease.Refusal.self) { try second.acquire() }
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, host.count)
        #expect(refusal?.description.contains("mounted read-write on \(String(cString: host))") == true, "\(String(describing: refusal))")
        #expect(refusal?.description.contains("until 20") == true)
        #expect(second.mayWrite() != nil)
        // The same store again (a remount): its own lease is taken back.
        let remount = Lease(bucket: backend, url: url, holder: "a", duration: 60)
        try remount.acquire()
        // (The first instance's ETag is stale now: its release must not free the lease.)
        first.release()
        #expect(throws: Lease.Refusal.self) { try Lease(bucket: backend, url: url, holder: "b", duration: 60).acquire() }
        remount.release()
        let third = Lease(bucket: backend, url: url, holder: "c", duration: 60)
        try third.acquire()
        #expect(third.mayWrite() == nil)
    }

    @Test("a dead holder's lease expires after its time (the taker's clock past it); take_over takes a live one; the old holder's renewal finds it lost")
    func expiryAndTakeOver() throws {
        let (backend, url) = try Self.bucket()
        let now = Int(time(nil))
        let dead = Lease(bucket: backend, url: url, holder: "dead", duration: 3)
        try dead.acquire()
        #expect(throws: Lease.Refusal.self) { try Lease(bucket: backend, url: url, holder: "early", duration: 3, clock: { now + 2 }).acquire() }
        let later = Lease(bucket: backend, url: url, holder: "later", duration: 3, clock: { now + 4 })
        try later.acquire()
        #expect(later.mayWrite() == nil)
        let forced = Lease(bucket: backend, url: url, holder: "forced", duration: 600)
        try forced.acquire(takeOver: true)
        #expect(forced.mayWrite() == nil)
        // The first holder renews (every second here) and finds it taken.
        let logged = Mutex<[String]>([])
        dead.startRenewing(log: { line in logged.withLock { $0.append(line) } })
        eventually("the lost lease noticed") { dead.mayWrite() != nil }
        dead.release()
        #expect(dead.mayWrite()?.contains("taken by") == true)
        #expect(forced.mayWrite() == nil, "a release of a lost lease must not release the new holder's")
        #expect(throws: Lease.Refusal.self) { try Lease(bucket: backend, url: url, holder: "x", duration: 3).acquire() }
    }

    @Test("two stores racing for an expired lease (each on its own connection, both past their read): exactly one wins, every time")
    func racingTakers() throws {
        let (_, url) = try Self.bucket()
        for round in 0..<5 {
            let now = Int(time(nil)) + 1000 * (round + 1)
            let bothRead = RaceBarrier(parties: 2)
            let takers = try (0..<2).map { i in
                let backend = try S3ObjectBackend(location: RemoteLocation(url: url, endpoint: gateway!.endpoint), credentials: gateway!.credentials)
                return Lease(bucket: BarrierBucket(inner: backend, barrier: bothRead), url: url, holder: "r\(round)-\(i)", duration: 10, clock: { now })
            }
            let group = DispatchGroup()
            for taker in takers { DispatchQueue.global().async(group: group) { try? taker.acquire() } }
            #expect(group.wait(timeout: .now() + 60) == .success)
            #expect(takers.filter { $0.mayWrite() == nil }.count == 1, "round \(round)")
        }
    }

    @Test("without the lease nothing is uploaded or snapshotted, and stats says why")
    func noLeaseNoWrites() throws {
        let f = try RemoteFixture()
        let other = Lease(bucket: try f.backend(), url: f.remote.url, holder: "other", duration: 600)
        try other.acquire()
        let mine = Lease(bucket: try f.backend(), url: f.remote.url, holder: "mine", duration: 600)
        #expect(throws: Lease.Refusal.self) { try mine.acquire() }
        _ = try f.store.createFile(TestStore.roll, "x.jpg", contents: bytes("x"))
        f.store.library.startRemoteSync(try f.backend(), lease: mine)
        eventually("the uploader says why it waits") { f.store.library.lastRemoteError?.contains("mounted read-write") == true }
        #expect(try f.bucket.list("").filter { $0.key != "lease" }.isEmpty, "something was written without the lease")
        #expect(try f.store.library.uploadsQueued() == 1)
        f.store.library.stopRemoteSync()
        #expect(try f.bucket.list("snapshots/").isEmpty)
    }
}

/// Both takers' first reads done before either goes on (a pause point in the race).
final class RaceBarrier: @unchecked Sendable {
    private let lock = NSCondition()
    private var waiting: Int
    init(parties: Int) { waiting = parties }
    func arrive() {
        lock.lock()
        waiting -= 1
        if waiting <= 0 { lock.broadcast() }
        let deadline = Date().addingTimeInterval(30)
        while waiting > 0 && lock.wait(until: deadline) {}
        lock.unlock()
    }
}

/// A bucket whose first read of each taker waits at the barrier.
final class BarrierBucket: LeaseBucket, @unchecked Sendable {
    let inner: S3ObjectBackend
    let barrier: RaceBarrier
    private let first = Mutex(true)
    init(inner: S3ObjectBackend, barrier: RaceBarrier) { (self.inner, self.barrier) = (inner, barrier) }
    func read(_ key: String) throws -> (bytes: [UInt8], etag: String)? {
        let found = try inner.read(key)
        if first.withLock({ first in defer { first = false }; return first }) { barrier.arrive() }
        return found
    }
    func put(_ key: String, bytes: [UInt8], ifETag etag: String?) throws -> String? { try inner.put(key, bytes: bytes, ifETag: etag) }
}
