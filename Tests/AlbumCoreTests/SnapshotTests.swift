#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import AlbumCore
import ObjectStore
import Digests
import Zstd
import SQLiteKit
import Synchronization

@Suite("Surviving the machine: snapshots, companions (SEMANTICS.md § Surviving the machine)")
struct SnapshotRulesTests {
    @Test("retention: all of the last day, then the newest of each day, week and month; the newest always")
    func retention() {
        let day = 86_400, now = 400 * day
        let times = [now - 10, now - 3_600, now - day - 10, now - day - 20, now - 3 * day - 100, now - 3 * day - 200,
                     now - 20 * day, now - 20 * day - 60, now - 200 * day, now - 390 * day]
        let expired = Snapshots.expired(times, now: now)
        #expect(!expired.contains(now - 10) && !expired.contains(now - 3_600), "the last day is kept whole")
        #expect(expired.contains(now - day - 20) && !expired.contains(now - day - 10), "one a day: the newest")
        #expect(expired.contains(now - 3 * day - 200) && !expired.contains(now - 3 * day - 100))
        #expect(expired.contains(now - 20 * day - 60) && !expired.contains(now - 20 * day), "one a week")
        #expect(!expired.contains(now - 200 * day), "one a month for a year")
        #expect(expired.contains(now - 390 * day), "older than a year")
        #expect(Snapshots.expired([now - 900 * day], now: now).isEmpty, "the newest is never deleted")
    }

    @Test("a snapshot's key says when it was taken, in UTC to the millisecond, and sorts by time")
    func keys() {
        let key = Snapshots.key(at: 1_796_400_000_042_000_000)
        #expect(key == "snapshots/20261204T160000042Z.db.zst")
        #expect(Snapshots.time(of: key) == 1_796_400_000)
        #expect(Snapshots.time(of: "snapshots/2026120T160000042Z.db.zst") == nil)
        #expect(Snapshots.time(of: "snapshots/20261204T16000004xZ.db.zst") == nil)
        #expect(Snapshots.key(at: 1_796_400_000_042_000_000) < Snapshots.key(at: 1_796_400_000_043_000_000))
        #expect(Snapshots.key(at: 1_796_400_000_999_000_000) < Snapshots.key(at: 1_796_400_001_000_000_000))
    }

    @Test("a companion reads back as written, names of any bytes included; another object is not one")
    func companion() throws {
        let odd: Name = [0x66, 0x0a, 0x2f, 0xff, 0x20]
        let companion = Companion(asset: 42, digest: ObjectDigest(sha256: String(repeating: "ab", count: 32), size: 5, chunks: [1, 2]),
                                  modified: 123, mode: 0o644, uid: 1000, gid: 100, uploaded: 99, favorite: true,
                                  rollName: odd, albums: [[name("Trips"), name("2026"), odd], [name("A"), name("x.jpg")]])
        #expect(Companion(decoding: companion.encoded()) == companion)
        #expect(Companion(decoding: Array("not a companion\n".utf8)) == nil)
        #expect(Companion(decoding: Array(companion.encoded().dropLast(30))) == nil)
    }

    /// A scratch file, unlinked: its descriptor.
    static func scratch() throws -> Int32 {
        var template = Array((NSTemporaryDirectory() + "/albumfs-rows-XXXXXX").utf8CString)
        let fd = mkstemp(&template)
        try #require(fd >= 0)
        unlink(String(cString: template))
        return fd
    }

    /// A rows stream of these schema entries (type, name, sql) and nothing else, rebuilt into a new database.
    static func rebuilt(_ schema: [(String, String, String)]) throws -> Database {
        let fd = try scratch()
        defer { close(fd) }
        var encoder = SnapshotEncoder { bytes in _ = write(fd, bytes.baseAddress, bytes.count) }
        for (type, name, sql) in schema {
            try encoder.record(.schema)
            encoder.string(type.utf8)
            encoder.string(name.utf8)
            encoder.string(sql.utf8)
        }
        try encoder.finish()
        lseek(fd, 0, SEEK_SET)
        var decoder = try #require(try SnapshotDecoder(fd))
        let path = NSTemporaryDirectory() + "/albumfs-rebuilt-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).db"
        defer { unlink(path) }
        try Database.rebuild(from: &decoder, into: path)
        return try Database(path: path, mode: .readOnly)
    }

    @Test("rows read straight from the decompressor: a snapshot damaged in its last byte is refused, and so is anything after the end record")
    func checksumChecked() throws {
        let packed = try Self.scratch()
        defer { close(packed) }
        let writer = try Zstd.Writer(packed)
        var encoder = SnapshotEncoder(sink: writer.write)
        try encoder.record(.schema)
        for text in ["table", "t", "CREATE TABLE t(a)"] { encoder.string(text.utf8) }
        try encoder.record(.table)
        encoder.string("t".utf8)
        encoder.unsigned(1)
        try encoder.record(.row)
        encoder.value(.text(Array("a row".utf8)))
        try encoder.record(.tableEnd)
        try encoder.finish()
        try writer.finish()
        func rebuilt() throws {
            lseek(packed, 0, SEEK_SET)
            let reader = try Zstd.Reader(packed)
            var decoder = try #require(try SnapshotDecoder(reading: reader.read))
            let path = NSTemporaryDirectory() + "/albumfs-checked-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).db"
            defer { unlink(path) }
            try Database.rebuild(from: &decoder, into: path)
        }
        try rebuilt()
        // The frame's last 4 bytes are its checksum (XXH64's low half): flip one.
        let length = lseek(packed, 0, SEEK_END)
        var last: UInt8 = 0
        pread(packed, &last, 1, length - 1)
        last ^= 0xFF
        pwrite(packed, &last, 1, length - 1)
        #expect(throws: (any Error).self) { try rebuilt() }

        // Anything after the end record is refused too (the rebuild reads its source to the end).
        let plain = try Self.scratch()
        defer { close(plain) }
        var again = SnapshotEncoder { bytes in _ = write(plain, bytes.baseAddress, bytes.count) }
        try again.finish()
        _ = write(plain, "x", 1)
        lseek(plain, 0, SEEK_SET)
        var trailing = try #require(try SnapshotDecoder(plain))
        let path = NSTemporaryDirectory() + "/albumfs-trailing-\(getpid()).db"
        defer { unlink(path) }
        #expect(throws: SnapshotFormat.Corrupt.self) { try Database.rebuild(from: &trailing, into: path) }
    }

    @Test("a recovery runs only the CREATE TABLE and CREATE INDEX a snapshot names, one statement each, whatever else its SQL says")
    func hostileSchema() throws {
        let db = try Self.rebuilt([("table", "t", "CREATE TABLE t(a); CREATE TABLE evil(b)"),
                                   ("index", "i", "CREATE INDEX i ON t(a); DROP TABLE t")])
        #expect(try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE name IN ('t', 'i')") == 2)
        #expect(try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE name = 'evil'") == 0)
        for entry in [("trigger", "x", "CREATE TRIGGER x AFTER INSERT ON t BEGIN SELECT 1; END"),
                      ("table", "y", "ATTACH DATABASE '/tmp/albumfs-evil.db' AS y")] {
            #expect(throws: SnapshotFormat.Corrupt.self) { _ = try Self.rebuilt([entry]) }
        }
        #expect(!FileManager.default.fileExists(atPath: "/tmp/albumfs-evil.db"))
    }

    @Test("a snapshot's rows read back exactly: every kind of value, text that is not UTF-8, empty and 3 MiB blobs across the buffers; cut short is an error")
    func rowsRoundTrip() throws {
        let fd = try Self.scratch()
        defer { close(fd) }
        let big = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 11) }
        let values: [ColumnValue] = [.null, .integer(.min), .integer(.max), .integer(0), .real(-0.5), .real(.infinity),
                                     .text([0x66, 0xff, 0x00, 0x41]), .text([]), .blob([]), .blob(big), .integer(-1)]
        var encoder = SnapshotEncoder { bytes in _ = write(fd, bytes.baseAddress, bytes.count) }
        try encoder.record(.table)
        encoder.string("t".utf8)
        encoder.unsigned(UInt64(values.count))
        for _ in 0..<3 {
            try encoder.record(.row)
            for value in values { encoder.value(value) }
        }
        try encoder.record(.tableEnd)
        try encoder.finish()
        let length = lseek(fd, 0, SEEK_END)
        lseek(fd, 0, SEEK_SET)
        var decoder = try #require(try SnapshotDecoder(fd))
        #expect(try decoder.record() == .table && decoder.text() == "t" && decoder.unsigned() == UInt64(values.count))
        for _ in 0..<3 {
            #expect(try decoder.record() == .row)
            #expect(try values.map { _ in try decoder.value() } == values)
        }
        #expect(try decoder.record() == .tableEnd && decoder.record() == .end)
        // Cut short: an error, never a short table.
        ftruncate(fd, length - 100)
        lseek(fd, 0, SEEK_SET)
        var cut = try #require(try SnapshotDecoder(fd))
        #expect(throws: SnapshotFormat.Corrupt.self) {
            while try cut.record() != .end { _ = try cut.text(); _ = try cut.unsigned()
                while try cut.record() == .row { for _ in values { _ = try cut.value() } } }
        }
        // Not the format at all (a database file, as older versions wrote): not read as one.
        lseek(fd, 0, SEEK_SET)
        _ = Array("SQLite format 3\0".utf8).withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        #expect(try SnapshotDecoder(fd) == nil)
    }
}

@Suite("Surviving the machine: a library rebuilt from its bucket (SEMANTICS.md § Surviving the machine)", .serialized,
       .enabled(if: gateway != nil, "needs RADOSGW_ENDPOINT and keys: scripts/test starts one"))
struct RecoveryTests {
    static let snapshotting = Array("user.albumfs.snapshotting".utf8)

    /// What a person sees of a library: every directory's names with their
    /// inode, the favorites, what Recently Deleted holds.
    static func listing(_ library: Library) throws -> [String] {
        var lines: [String] = []
        func walk(_ directory: NodeID, _ path: String) throws {
            for entry in try library.list(directory, after: 0, limit: 100_000) {
                let name = path + "/" + String(decoding: entry.name, as: UTF8.self)
                if path.isEmpty && !["Camera Roll", "Albums", "Recently Deleted"].contains(String(decoding: entry.name, as: UTF8.self)) { continue }
                let favorite = (try? library.extendedAttribute(entry.attributes.id, Array("user.albumfs.favorite".utf8))) != nil ? "favorite" : "-"
                lines.append("\(name) \(entry.attributes.id) \(entry.attributes.size) \(favorite)")
                if entry.attributes.kind != .asset { try walk(entry.attributes.id, name) }
            }
        }
        try walk(FixedNode.root, "")
        return lines.sorted()
    }

    static func backend(_ f: RemoteFixture) throws -> S3ObjectBackend { try f.backend() }

    @Test("sync's read of user.albumfs.snapshotting takes a snapshot; recover gives back names, inodes, albums, favorites, Recently Deleted and bytes")
    func recoverFromSnapshot() throws {
        let f = try RemoteFixture(snapshotSettle: 3600)
        let s = f.store
        let album = try s.makeAlbum("Trips")
        let nested = try s.makeAlbum(album, "2026")
        var contents: [String: [UInt8]] = [:]
        for i in 0..<5 {
            let bytes = (0..<(1000 + i)).map { UInt8(truncatingIfNeeded: $0 &* (i + 3)) }
            let id = try s.createFile(TestStore.roll, "IMG_\(i).JPG", contents: bytes)
            contents["IMG_\(i).JPG"] = bytes
            if i < 3 { _ = try s.library.link(id, into: album, named: name("trip \(i).jpg")) }
            if i == 1 { _ = try s.library.link(id, into: nested, named: name("one.jpg")) }
        }
        _ = try s.library.link(try #require(try s.id(TestStore.roll, "IMG_2.JPG")), into: FixedNode.favorites, named: name("IMG_2.JPG"))
        _ = try s.library.unlink(TestStore.roll, name("IMG_4.JPG"))
        try f.start()
        try f.synced()
        #expect(try f.bucket.list("snapshots/").isEmpty, "no snapshot before a minute of quiet (here an hour) or a wait for one")
        #expect(try s.library.extendedAttribute(TestStore.root, Self.snapshotting) == bytes("1"))
        eventually("a snapshot in the bucket") { try s.library.extendedAttribute(TestStore.root, Self.snapshotting) == bytes("0") }
        #expect(try f.bucket.list("snapshots/").count == 1)
        let before = try Self.listing(s.library)
        s.library.stopRemoteSync()

        let target = StoreLocation(path: s.directory + "/recovered")
        let (recovered, report) = try Library.recover(from: try f.backend(), remote: f.remote, at: nil, into: target, owner: TestStore.owner)
        #expect(report.snapshot != nil && report.lost == 0 && report.fromCompanions == 0)
        #expect(try Self.listing(recovered) == before)
        recovered.startRemoteSync(try f.backend())
        defer { recovered.stopRemoteSync() }
        for (fileName, original) in contents where fileName != "IMG_4.JPG" {
            let id = try recovered.lookup(TestStore.roll, name(fileName)).id
            #expect(try recovered.extendedAttribute(id, Array("user.albumfs.storage".utf8)) == bytes("remote"))
            let file = try recovered.open(id, writable: false, truncate: false)
            var buffer = [UInt8](repeating: 0, count: original.count + 8)
            let n = try buffer.withUnsafeMutableBytes { try recovered.read(file, into: $0.baseAddress!, count: $0.count, at: 0) }
            try recovered.release(file)
            #expect(Array(buffer[..<n]) == original)
        }
    }

    @Test("a snapshot's copy never holds up the library's writers: a change made while it is copied commits at once, and is in no snapshot yet")
    func copyDoesNotBlockWriters() throws {
        let f = try RemoteFixture(snapshotSettle: 3600)
        let s = f.store
        _ = try s.createFile(TestStore.roll, "before.jpg", contents: bytes("before"))
        let took = Mutex<Double?>(nil)
        let library = s.library
        library.pausePoints.install { point throws(LibraryError) in
            guard point == .snapshotCopying, took.withLock({ $0 }) == nil else { return }
            let start = Date()
            // (On the uploader's thread, inside the copy's transaction.)
            _ = try library.createAsset(in: TestStore.roll, named: name("during.jpg"), mode: 0o644, by: TestStore.owner)
            took.withLock { $0 = Date().timeIntervalSince(start) }
        }
        try f.start()
        try f.synced()
        // (Each read of the count asks for a snapshot now.)
        eventually("a snapshot's copy reached") { _ = try? library.extendedAttribute(TestStore.root, Self.snapshotting); return took.withLock { $0 } != nil }
        let seconds = try #require(took.withLock { $0 })
        #expect(seconds < 1, "a write waited \(seconds) s for the snapshot's copy")
        library.pausePoints.install(nil)
        s.library.stopRemoteSync()
    }

    @Test("a second device's cache: made from the newest snapshot, kept while it is the newest, rebuilt from a newer one; it never writes to the bucket")
    func mirrorCache() throws {
        let f = try RemoteFixture(snapshotSettle: 3600)
        let s = f.store
        _ = try s.createFile(TestStore.roll, "one.jpg", contents: bytes("one"))
        try f.start()
        try f.synced()
        eventually("a snapshot") { try s.library.extendedAttribute(TestStore.root, Self.snapshotting) == bytes("0") }
        let cache = StoreLocation(path: s.directory + "/cache")
        let first = try Library.prepareMirror(at: cache, of: f.remote, from: try f.backend(), owner: TestStore.owner)
        #expect(first != nil)
        do {
            let mirror = try Library(location: cache, owner: TestStore.owner)
            mirror.startRemoteSync(try f.backend(), mirror: true)
            #expect(try Self.listing(mirror) == Self.listing(s.library))
            let id = try mirror.lookup(TestStore.roll, name("one.jpg")).id
            let file = try mirror.open(id, writable: false, truncate: false)
            var buffer = [UInt8](repeating: 0, count: 16)
            let n = try buffer.withUnsafeMutableBytes { try mirror.read(file, into: $0.baseAddress!, count: $0.count, at: 0) }
            try mirror.release(file)
            #expect(Array(buffer[..<n]) == bytes("one"))
            eventually("the original installed in the cache") {
                try mirror.extendedAttribute(id, Array("user.albumfs.storage".utf8)) == bytes("both")
            }
            #expect(mirror.snapshotPending == false, "a mirror has nothing to snapshot (sync --wait returns)")
            mirror.stopRemoteSync()
        }
        #expect(try f.bucket.list("snapshots/").count == 1, "the mirror wrote a snapshot")
        #expect(try Library.prepareMirror(at: cache, of: f.remote, from: try f.backend(), owner: TestStore.owner) == first)
        let one = try s.library.lookup(TestStore.roll, name("one.jpg")).id
        #expect(pathExists(ContentStore(directory: cache.contentPath).path(of: one)), "the cache kept its original while the snapshot is the newest")
        // A newer snapshot (named to the millisecond: another name, even within the second).
        _ = try s.makeAlbum("Later")
        eventually("another snapshot") { try s.library.extendedAttribute(TestStore.root, Self.snapshotting) == bytes("0") }
        let second = try Library.prepareMirror(at: cache, of: f.remote, from: try f.backend(), owner: TestStore.owner)
        #expect(second != first)
        let rebuilt = try Library(location: cache, owner: TestStore.owner)
        #expect(try Self.listing(rebuilt) == Self.listing(s.library))
        s.library.stopRemoteSync()
    }

    @Test("a second device's refresh takes the newest snapshot while open: its rows, the kernel told of every name that went, the cached originals of unchanged objects kept")
    func mirrorRefresh() throws {
        let f = try RemoteFixture(snapshotSettle: 3600)
        let s = f.store
        let album = try s.makeAlbum("A")
        for fileName in ["one.jpg", "two.jpg"] {
            let id = try s.createFile(TestStore.roll, fileName, contents: bytes(fileName))
            _ = try s.library.link(id, into: album, named: name(fileName))
        }
        try f.start()
        try f.synced()
        eventually("a snapshot") { try s.library.extendedAttribute(TestStore.root, Self.snapshotting) == bytes("0") }
        let cache = StoreLocation(path: s.directory + "/cache")
        let first = try #require(try Library.prepareMirror(at: cache, of: f.remote, from: try f.backend(), owner: TestStore.owner))
        let mirror = try Library(location: cache, owner: TestStore.owner)
        mirror.startRemoteSync(try f.backend(), mirror: true)
        defer { mirror.stopRemoteSync() }
        let told = Mutex<[ChangeSet]>([])
        mirror.onBackgroundChanges { changes in told.withLock { $0.append(changes) } }
        #expect(try mirror.refreshMirror() == .unchanged(snapshot: first))
        #expect(told.withLock { $0.isEmpty })
        let two = try mirror.lookup(TestStore.roll, name("two.jpg")).id
        let file = try mirror.open(two, writable: false, truncate: false)
        try mirror.release(file)
        eventually("two.jpg cached") { try mirror.extendedAttribute(two, Array("user.albumfs.storage".utf8)) == bytes("both") }

        _ = try s.library.rename(FixedNode.albumsRoot, name("A"), to: FixedNode.albumsRoot, name("B"), by: TestStore.owner)
        _ = try s.library.unlink(TestStore.roll, name("one.jpg"))
        _ = try s.createFile(TestStore.roll, "three.jpg", contents: bytes("three"))
        try f.synced()
        eventually("another snapshot") { try s.library.extendedAttribute(TestStore.root, Self.snapshotting) == bytes("0") }
        // The comparison holds no lock: the mount answers meanwhile (another thread's lookup).
        let answered = Mutex<Bool?>(nil)
        mirror.pausePoints.install { point throws(LibraryError) in
            guard point == .refreshCompared else { return }
            let done = DispatchSemaphore(value: 0)
            let found = Mutex(false)
            DispatchQueue.global().async {
                let answer = (try? mirror.lookup(TestStore.roll, name("two.jpg"))) != nil
                found.withLock { $0 = answer }
                done.signal()
            }
            let inTime = done.wait(timeout: .now() + 5) == .success
            answered.withLock { $0 = inTime && found.withLock { $0 } }
        }
        let refreshed = try mirror.refreshMirror()
        mirror.pausePoints.install(nil)
        #expect(answered.withLock { $0 } == true, "a lookup waited for the refresh's comparison")
        guard case .refreshed(let snapshot, _) = refreshed else { Issue.record("not refreshed: \(refreshed)"); return }
        #expect(snapshot > first)
        #expect(try Self.listing(mirror) == Self.listing(s.library))
        let names = told.withLock { $0.flatMap(\.entries) }.map { "\($0.directory) \(String(decoding: $0.name, as: UTF8.self))" }
        for gone in ["\(FixedNode.albumsRoot) A", "\(TestStore.roll) one.jpg", "\(album) one.jpg"] {
            #expect(names.contains(gone), "the kernel is not told that \(gone) went")
        }
        #expect(try mirror.extendedAttribute(two, Array("user.albumfs.storage".utf8)) == bytes("both"), "an unchanged original stays cached")
        #expect(!pathExists(cache.root + "/refreshing"), "the refresh left its scratch store (or its 8 MiB reserve) in the cache")
        #expect(try mirror.refreshMirror() == .unchanged(snapshot: snapshot))
        #expect(throws: LibraryError.notSupported) { try s.library.refreshMirror() }
        s.library.stopRemoteSync()
    }

    @Test("a refresh waits for the download of an original that changed (it fetches the old object into the file a new one uses): the mirror then reads the new bytes")
    func mirrorRefreshWaitsForDownload() throws {
        let f = try RemoteFixture(snapshotSettle: 3600)
        let s = f.store
        let chunk = Int(ObjectDigest.chunkSize)
        let old = (0..<(2 * chunk + 100)).map { UInt8(truncatingIfNeeded: $0 / 4096 &* 7 &+ $0 % 251) }
        let id = try s.createFile(TestStore.roll, "clip.mov", contents: old)
        try f.start()
        try f.synced()
        eventually("a snapshot") { try s.library.extendedAttribute(TestStore.root, Self.snapshotting) == bytes("0") }
        let cache = StoreLocation(path: s.directory + "/cache")
        _ = try Library.prepareMirror(at: cache, of: f.remote, from: try f.backend(), owner: TestStore.owner)
        var options = LibraryOptions()
        options.remoteTimeout = 30
        let mirror = try Library(location: cache, owner: TestStore.owner, options: options)
        // Past its first chunk the old object's download waits for the gate.
        let gate = GatedBackend(try f.backend(), openBelow: ObjectDigest.chunkSize)
        mirror.startRemoteSync(gate, mirror: true)
        defer { gate.release(); mirror.stopRemoteSync() }
        let reader = try mirror.open(id, writable: false, truncate: false)
        #expect(try RemoteReadTests.read(mirror, reader, 0..<100) == Array(old[0..<100]))

        let new = old.map { $0 ^ 0x5A }
        try s.write(id, new)
        try f.synced()
        eventually("a snapshot of the update") { try s.library.extendedAttribute(TestStore.root, Self.snapshotting) == bytes("0") }
        let waited = Atomic<Bool>(false)
        mirror.pausePoints.install { point throws(LibraryError) in
            guard point == .refreshWaitingForDownload else { return }
            waited.store(true, ordering: .relaxed)
            gate.release()
        }
        guard case .refreshed = try mirror.refreshMirror() else { Issue.record("not refreshed"); return }
        gate.release()
        let didWait = waited.load(ordering: .relaxed)
        #expect(didWait, "the refresh did not wait for the old object's download")
        #expect(try RemoteReadTests.read(mirror, reader, 0..<100) == Array(old[0..<100]), "a handle open across the refresh reads what it opened")
        try mirror.release(reader)
        let fresh = try mirror.open(id, writable: false, truncate: false)
        defer { try? mirror.release(fresh) }
        #expect(try RemoteReadTests.read(mirror, fresh, 0..<new.count) == new, "the mirror serves the old object after the refresh")
        s.library.stopRemoteSync()
    }

    @Test("a snapshot is the database's rows (SnapshotFormat); one an older version wrote, a copy of the database file, still recovers")
    func olderSnapshotFormat() throws {
        let f = try RemoteFixture(snapshotSettle: 3600)
        let s = f.store
        let album = try s.makeAlbum("Trips")
        let id = try s.createFile(TestStore.roll, "IMG_1.JPG", contents: Array("one".utf8))
        _ = try s.library.link(id, into: album, named: name("one.jpg"))
        try f.start()
        eventually("a snapshot") { try s.library.extendedAttribute(TestStore.root, Self.snapshotting) == bytes("0") }
        s.library.stopRemoteSync()
        let listed = try f.bucket.list("snapshots/").map(\.key)
        let key = try #require(listed.first)
        // The new snapshot's first bytes, once decompressed: the format's magic.
        let packed = try SnapshotRulesTests.scratch(), plain = try SnapshotRulesTests.scratch()
        defer { close(packed); close(plain) }
        let whole = try f.bucket.get(key)
        _ = whole.withUnsafeBytes { write(packed, $0.baseAddress, $0.count) }
        lseek(packed, 0, SEEK_SET)
        try Zstd.decompress(packed, into: plain)
        lseek(plain, 0, SEEK_SET)
        #expect(try SnapshotDecoder(plain) != nil)
        let expected = try Self.listing(s.library)

        // What an older version put there: the database file (VACUUM INTO), compressed, under a later key.
        let copy = s.directory + "/old-format.db"
        try Database(path: s.location.databasePath, mode: .readWrite).execute("VACUUM INTO '\(copy)'")
        let source = open(copy, O_RDONLY), old = try SnapshotRulesTests.scratch()
        defer { close(source); close(old) }
        try Zstd.compress(source, into: old)
        let length = lseek(old, 0, SEEK_END)
        lseek(old, 0, SEEK_SET)
        var oldBytes = [UInt8](repeating: 0, count: Int(length))
        _ = oldBytes.withUnsafeMutableBytes { read(old, $0.baseAddress, $0.count) }
        let later = (try #require(Snapshots.time(of: key)) + 1) * 1_000_000_000   // (time(of:) is in seconds)
        try f.bucket.put(Snapshots.key(at: Nanoseconds(later)), bytes: oldBytes)
        let (recovered, report) = try Library.recover(from: try f.backend(), remote: f.remote, at: nil,
                                                      into: StoreLocation(path: s.directory + "/recovered"), owner: TestStore.owner)
        #expect(report.snapshot == Snapshots.key(at: Nanoseconds(later)) && report.skipped.isEmpty)
        #expect(try Self.listing(recovered) == expected)
    }

    @Test("a damaged or cut newest snapshot is skipped, named, for the one before it")
    func damagedSnapshotSkipped() throws {
        let f = try RemoteFixture(snapshotSettle: 3600)
        let s = f.store
        _ = try s.makeAlbum("First")
        try f.start()
        eventually("a snapshot") { try s.library.extendedAttribute(TestStore.root, Self.snapshotting) == bytes("0") }
        let older = try Self.listing(s.library)
        // (One or two: a background commit during the mount's first copy is in none yet, and is snapshotted too.)
        let first = try f.bucket.list("snapshots/").map(\.key).sorted()
        _ = try s.makeAlbum("Second")
        eventually("another snapshot") { try s.library.extendedAttribute(TestStore.root, Self.snapshotting) == bytes("0") }
        s.library.stopRemoteSync()
        let keys = try f.bucket.list("snapshots/").map(\.key).sorted()
        #expect(!first.isEmpty && keys.count == first.count + 1, "\(first) then \(keys)")
        let newest = try #require(keys.last), before = try #require(first.last)
        // The newest cut short (as a store that lies about a PUT would leave it).
        let whole = try f.bucket.get(newest)
        try f.bucket.put(newest, bytes: Array(whole.prefix(whole.count / 2)))
        let (recovered, report) = try Library.recover(from: try f.backend(), remote: f.remote, at: nil,
                                                      into: StoreLocation(path: s.directory + "/recovered"), owner: TestStore.owner)
        #expect(report.skipped == [newest] && report.snapshot == before)
        #expect(try Self.listing(recovered) == older)
    }

    @Test("recover fetches no companion written more than an hour before its snapshot (one GET each: 11 hours for 1,000,000 uploads)")
    func oldCompanionsNotFetched() throws {
        let f = try RemoteFixture(snapshotSettle: 3600)
        let s = f.store
        let album = try s.makeAlbum("Trips")
        for i in 0..<3 {
            let id = try s.createFile(TestStore.roll, "IMG_\(i).JPG", contents: bytes("photo \(i)"))
            _ = try s.library.link(id, into: album, named: name("\(i).jpg"))
        }
        try f.start()
        try f.synced()
        eventually("a snapshot") { try s.library.extendedAttribute(TestStore.root, Self.snapshotting) == bytes("0") }
        s.library.stopRemoteSync()
        let before = try Self.listing(s.library)
        #expect(try f.bucket.list("assets/").count == 3)

        // Recovered from that snapshot: its companions were written within the hour before it, and are read.
        let near = CountingGets(try f.backend())
        let (first, _) = try Library.recover(from: near, remote: f.remote, at: nil,
                                             into: StoreLocation(path: s.directory + "/near"), owner: TestStore.owner)
        #expect(near.companionGets == 3)
        #expect(try Self.listing(first) == before)
        // The same snapshot as if taken two hours after the uploads: none is read, and nothing is missing.
        let key = try #require(try f.bucket.list("snapshots/").map(\.key).max())
        let later = (try #require(Snapshots.time(of: key)) + 7200) * 1_000_000_000
        try f.bucket.put(Snapshots.key(at: Nanoseconds(later)), bytes: try f.bucket.get(key))
        let far = CountingGets(try f.backend())
        let (second, report) = try Library.recover(from: far, remote: f.remote, at: nil,
                                                   into: StoreLocation(path: s.directory + "/far"), owner: TestStore.owner)
        #expect(report.snapshot == Snapshots.key(at: Nanoseconds(later)))
        #expect(far.companionGets == 0)
        #expect(try Self.listing(second) == before)
    }

    @Test("uploads after the last snapshot come back from their companions, in their albums; purged ones do not")
    func recoverLaterUploads() throws {
        let f = try RemoteFixture(trashDays: 0, snapshotSettle: 3600)
        let s = f.store
        let album = try s.makeAlbum("Later")
        _ = try s.createFile(TestStore.roll, "first.jpg", contents: bytes("first"))
        try f.start()
        try f.synced()
        eventually("a snapshot") { try s.library.extendedAttribute(TestStore.root, Self.snapshotting) == bytes("0") }
        for i in 0..<4 {
            let id = try s.createFile(TestStore.roll, "new \(i).jpg", contents: bytes("new \(i)"))
            _ = try s.library.link(id, into: album, named: name("in album \(i).jpg"))
            if i == 0 { _ = try s.library.link(id, into: FixedNode.favorites, named: name("new 0.jpg")) }
        }
        try f.synced()
        _ = try s.library.unlink(TestStore.roll, name("new 3.jpg"))
        eventually("the purged asset's companion deleted") { try f.bucket.list("assets/").count == 4 }
        let snapshots = try f.bucket.list("snapshots/").count
        #expect(snapshots == 1, "no snapshot since (the machine dies before the next)")
        let before = try Self.listing(s.library)
        // The machine dies: no last snapshot at the end.
        s.library.pausePoints.install { point throws(LibraryError) in if point == .snapshotStarting { throw .io(EIO) } }
        s.library.stopRemoteSync()
        #expect(try f.bucket.list("snapshots/").count == 1)

        let target = StoreLocation(path: s.directory + "/recovered")
        let (recovered, report) = try Library.recover(from: try f.backend(), remote: f.remote, at: nil, into: target, owner: TestStore.owner)
        #expect(report.fromCompanions == 3)
        #expect(try Self.listing(recovered) == before)
    }
}

/// The bucket, counting the companions fetched.
final class CountingGets: ForwardingBackend, @unchecked Sendable {
    let inner: S3ObjectBackend
    private let gets = Mutex(0)
    var companionGets: Int { gets.withLock { $0 } }

    init(_ inner: S3ObjectBackend) { self.inner = inner }

    func get(_ key: String) throws -> [UInt8]? {
        if key.hasPrefix(Companion.prefix) { gets.withLock { $0 += 1 } }
        return try inner.get(key)
    }
}
