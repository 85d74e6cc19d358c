#if canImport(Glibc)
import Glibc
#endif
import SQLiteKit
import Testing
@testable import AlbumCore

private let roll = TestStore.roll
private let albums = TestStore.albums
private let root = TestStore.root

@Suite("Attributes: setattr, sizes, times, persistence")
struct AttributesTests {
    @Test("the fixed directories belong to the first opener, mode 0755")
    func fixedDirectoryOwnership() throws {
        let store = try TestStore()
        for id in [root, roll, albums] {
            let a = try store.library.attributes(of: id)
            #expect(a.mode == 0o755)
            #expect(a.uid == 1000 && a.gid == 1000)
        }
        // A later opener with another identity does not take them over.
        try store.reopen(owner: Caller(uid: 0, gid: 0))
        #expect(try store.library.attributes(of: roll).uid == 1000)
    }

    @Test("mode, owner and times round-trip, also across a reopen")
    func setAttributesRoundTrip() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x")
        let atime: Nanoseconds = 1_000_000_000_123_456_789
        let mtime: Nanoseconds = 946_684_800_000_000_001
        let result = try store.library.setAttributes(id, AttributeChanges(
            mode: 0o4751, uid: 42, gid: 43, accessTime: .set(atime), modificationTime: .set(mtime)))
        #expect(result.mode == 0o4751)
        for a in [try store.library.attributes(of: id), try store.reopen().attributes(of: id)] {
            #expect(a.mode == 0o4751)
            #expect(a.uid == 42)
            #expect(a.gid == 43)
            #expect(a.accessTime == atime)
            #expect(a.modificationTime == mtime)
            #expect(a.kind == .asset)
        }
    }

    @Test("mode keeps the permission bits only")
    func modeMasked() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x")
        let a = try store.library.setAttributes(id, AttributeChanges(mode: 0o100644))
        #expect(a.mode == 0o644)
    }

    @Test("changes on one entry show on every entry of the asset")
    func changesVisibleEverywhere() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(a, "x")
        _ = try store.library.setAttributes(id, AttributeChanges(mode: 0o600, uid: 5))
        try store.write(id, bytes("hello"))
        for (dir, entry) in [(roll, "x"), (a, "x")] {
            let attributes = try store.library.lookup(dir, name(entry))
            #expect(attributes.mode == 0o600)
            #expect(attributes.uid == 5)
            #expect(attributes.size == 5)
        }
        let listed = try store.library.list(a, after: 0, limit: 10)
        #expect(listed.first?.attributes.size == 5)
    }

    @Test("unchanged fields stay; ctime moves on every change; .now sets the clock")
    func partialChanges() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x", mode: 0o640)
        _ = try store.library.setAttributes(id, AttributeChanges(modificationTime: .set(5)))
        let before = try store.library.attributes(of: id)
        let start = currentTime()
        let after = try store.library.setAttributes(id, AttributeChanges(uid: 9, accessTime: .now))
        #expect(after.mode == 0o640)
        #expect(after.gid == before.gid)
        #expect(after.modificationTime == 5)
        #expect(after.accessTime >= start)
        #expect(after.changeTime >= start)
        #expect(after.uid == 9)
    }

    @Test("albums and fixed directories keep their own mode, owner and times")
    func directoryAttributes() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        for id in [a, roll, albums, root] {
            _ = try store.library.setAttributes(id, AttributeChanges(
                mode: 0o700, uid: 77, gid: 78, accessTime: .set(111), modificationTime: .set(222)))
        }
        try store.reopen()
        for id in [a, roll, albums, root] {
            let attributes = try store.library.attributes(of: id)
            #expect(attributes.mode == 0o700)
            #expect(attributes.uid == 77 && attributes.gid == 78)
            #expect(attributes.accessTime == 111)
            #expect(attributes.modificationTime == 222)
        }
        #expect(throws: LibraryError.isDirectory) {
            try store.library.setAttributes(a, AttributeChanges(size: 0))
        }
    }

    @Test("a truncate past the content filesystem's largest file fails with EFBIG and changes nothing (SEMANTICS.md § Durability and safety)")
    func truncateTooLargeChangesNothing() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x", contents: bytes("kept"))
        let before = try store.library.attributes(of: id)
        #expect(throws: LibraryError.fileTooLarge) {
            try store.library.setAttributes(id, AttributeChanges(size: 999_999_999_999_999))
        }
        #expect(try store.library.attributes(of: id) == before)
        #expect(store.dataSize(of: id) == 4)
        #expect(store.library.largestFileSize < 999_999_999_999_999, "the test store's filesystem holds such a file: the test proves nothing there")
        let reopened = try store.reopen()
        try #require(try reopened.attributes(of: id) == before)
        #expect(try store.read(id) == bytes("kept"))
        store.close()
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
    }

    @Test("setattr on a missing node: not found")
    func setAttributesMissing() throws {
        let store = try TestStore()
        #expect(throws: LibraryError.notFound) {
            try store.library.setAttributes(999_999, AttributeChanges(mode: 0o600))
        }
        #expect(throws: LibraryError.notFound) { try store.library.attributes(of: 999_999) }
    }

    @Test("written data shows in the size before the flush")
    func sizeBeforeFlush() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(a, "x")
        let file = try store.library.open(id, writable: true, truncate: false)
        let data = [UInt8](repeating: 0x42, count: 100)
        _ = try data.withUnsafeBytes { try store.library.write(file, from: $0.baseAddress!, count: 100, at: 0) }
        #expect(try store.library.attributes(of: id).size == 100)
        #expect(try store.library.lookup(roll, name("x")).size == 100)
        #expect(try store.library.lookup(a, name("x")).size == 100)
        // A write past the end grows it; one inside does not shrink it.
        _ = try data.withUnsafeBytes { try store.library.write(file, from: $0.baseAddress!, count: 10, at: 200) }
        _ = try data.withUnsafeBytes { try store.library.write(file, from: $0.baseAddress!, count: 10, at: 0) }
        #expect(try store.library.attributes(of: id).size == 210)
        try store.library.release(file)
        #expect(try store.library.attributes(of: id).size == 210)
        #expect(store.dataSize(of: id) == 210)
    }

    @Test("chmod after an unflushed write keeps the new size")
    func chmodAfterUnflushedWrite() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x")
        let file = try store.library.open(id, writable: true, truncate: false)
        let data = [UInt8](repeating: 7, count: 4096)
        _ = try data.withUnsafeBytes { try store.library.write(file, from: $0.baseAddress!, count: data.count, at: 0) }
        let changed = try store.library.setAttributes(id, AttributeChanges(mode: 0o600))
        #expect(changed.size == 4096)
        #expect(try store.library.attributes(of: id).size == 4096)
        try store.library.release(file)
        let reopened = try store.reopen().attributes(of: id)
        #expect(reopened.size == 4096)
        #expect(reopened.mode == 0o600)
    }

    @Test("a setattr of mtime during an open write is not undone by the flush")
    func touchDuringWriteSurvivesFlush() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x")
        let file = try store.library.open(id, writable: true, truncate: false)
        let data = bytes("abc")
        _ = try data.withUnsafeBytes { try store.library.write(file, from: $0.baseAddress!, count: 3, at: 0) }
        _ = try store.library.setAttributes(id, AttributeChanges(modificationTime: .set(1_234)))
        try store.library.flush(file)
        try store.library.release(file)
        let a = try store.reopen().attributes(of: id)
        #expect(a.modificationTime == 1_234)
        #expect(a.size == 3)
    }

    @Test("after flush and release, a reopened library shows the same size and mtime")
    func persistsAcrossReopen() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x")
        try store.write(id, bytes("hello, world"))
        let before = try store.library.attributes(of: id)
        #expect(before.size == 12)
        let after = try store.reopen().attributes(of: id)
        #expect(after.size == before.size)
        #expect(after.modificationTime == before.modificationTime)
        #expect(after.changeTime == before.changeTime)
        #expect(try store.read(id) == bytes("hello, world"))
    }

    @Test("flush alone commits: the size is stored while the file is still open")
    func flushCommits() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x")
        let file = try store.library.open(id, writable: true, truncate: false)
        let data = bytes("12345")
        _ = try data.withUnsafeBytes { try store.library.write(file, from: $0.baseAddress!, count: 5, at: 0) }
        try store.library.flush(file)
        // The row is committed: another connection reads the new size.
        let db = try Database(path: store.location.databasePath, mode: .readOnly)
        #expect(try db.scalarInt("SELECT size FROM nodes WHERE id = \(id)") == 5)
        try store.library.release(file)
    }

    @Test("a write modifies mtime and ctime")
    func writeUpdatesTimes() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x")
        _ = try store.library.setAttributes(id, AttributeChanges(accessTime: .set(1), modificationTime: .set(1)))
        // The kernel stamps a write with its coarse clock, as ext4 stamps a file's.
        var coarse = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &coarse)
        let start = Int64(coarse.tv_sec) * 1_000_000_000 + Int64(coarse.tv_nsec)
        try store.write(id, bytes("x"))
        let a = try store.library.attributes(of: id)
        #expect(a.modificationTime >= start)
        #expect(a.changeTime >= start)
        #expect(a.accessTime == 1)
    }

    @Test("truncate through setattr and through open")
    func truncate() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x")
        try store.write(id, bytes("0123456789"))
        var a = try store.library.setAttributes(id, AttributeChanges(size: 4))
        #expect(a.size == 4)
        #expect(try store.read(id) == bytes("0123"))
        a = try store.library.setAttributes(id, AttributeChanges(size: 8))
        #expect(a.size == 8)
        #expect(try store.read(id) == bytes("0123") + [0, 0, 0, 0])
        #expect(store.dataSize(of: id) == 8)
        #expect(throws: LibraryError.invalidArgument) {
            try store.library.setAttributes(id, AttributeChanges(size: -1))
        }
        let file = try store.library.open(id, writable: true, truncate: true)
        #expect(try store.library.attributes(of: id).size == 0)
        try store.library.release(file)
        #expect(store.dataSize(of: id) == 0)
        #expect(try store.reopen().attributes(of: id).size == 0)
    }

    @Test("opening a directory: is a directory")
    func openDirectory() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        #expect(throws: LibraryError.isDirectory) { try store.library.open(a, writable: false, truncate: false) }
        #expect(throws: LibraryError.isDirectory) { try store.library.open(roll, writable: false, truncate: false) }
    }

    @Test("an asset deleted while open still answers attributes; its data is readable")
    func deletedWhileOpen() throws {
        let store = try TestStore(options: .purgeAtOnce)
        let id = try store.createFile(roll, "x", contents: bytes("still here"))
        let file = try store.library.open(id, writable: false, truncate: false)
        _ = try store.library.unlink(roll, name("x"))
        let a = try store.library.attributes(of: id)
        #expect(a.linkCount == 0)
        #expect(a.size == 10)
        var buffer = [UInt8](repeating: 0, count: 10)
        let n = try buffer.withUnsafeMutableBytes { try store.library.read(file, into: $0.baseAddress!, count: 10, at: 0) }
        #expect(n == 10)
        #expect(buffer == bytes("still here"))
        // An open of it by its inode (as through /proc/PID/fd) finds nothing: ENOENT, not damage (EIO).
        store.library.waitForFreedData()
        #expect(throws: LibraryError.notFound) { try store.library.open(id, writable: false, truncate: false) }
        try store.library.release(file)
        #expect(throws: LibraryError.notFound) { try store.library.attributes(of: id) }
    }

    @Test("a read-only library refuses every change")
    func readOnlyLibrary() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x", contents: bytes("ro"))
        store.close()
        let library = try Library(location: store.location, owner: TestStore.owner, readOnly: true)
        #expect(library.isReadOnly)
        #expect(try library.attributes(of: id).size == 2)
        #expect(throws: LibraryError.readOnly) {
            try library.createAsset(in: roll, named: name("y"), mode: 0o644, by: TestStore.owner)
        }
        #expect(throws: LibraryError.readOnly) { try library.unlink(roll, name("x")) }
        #expect(throws: LibraryError.readOnly) { try library.setAttributes(id, AttributeChanges(mode: 0)) }
        #expect(throws: LibraryError.readOnly) { try library.open(id, writable: true, truncate: false) }
        #expect(throws: LibraryError.readOnly) {
            try library.rename(roll, name("x"), to: roll, name("z"))
        }
        let file = try library.open(id, writable: false, truncate: false)
        try library.release(file)
    }
}

/// One error type, typed cases for what the library decides (STYLE: one
/// mapping to errno, at the FUSE boundary; damage said once, in the log).
@Suite("Errors the library decides are typed, and only damage is worth a log line")
struct LibraryErrorTests {
    @Test("a write or fallocate through a handle opened for reading is .notOpenForWriting (EBADF), not a bare errno")
    func writeThroughAReadHandle() throws {
        let store = try TestStore()
        let id = try store.createFile(TestStore.roll, "x", contents: bytes("data"))
        let file = try store.library.open(id, writable: false, truncate: false)
        defer { try? store.library.release(file) }
        #expect(throws: LibraryError.notOpenForWriting) {
            _ = try bytes("x").withUnsafeBytes { try store.library.write(file, from: $0.baseAddress!, count: 1, at: 0) }
        }
        #expect(throws: LibraryError.notOpenForWriting) { try store.library.allocate(file, mode: 0, offset: 0, length: 10) }
    }

    @Test("damage and bugs carry a log line; ordinary answers do not")
    func diagnostics() {
        #expect(LibraryError.missingData(7).diagnostic?.contains("asset 7") == true)
        #expect(LibraryError.inconsistent("x").diagnostic != nil)
        #expect(LibraryError.database(code: 11, message: "malformed").diagnostic != nil)
        for ordinary: LibraryError in [.notFound, .exists, .notPermitted, .noSpace, .notOpenForWriting, .io(EIO)] {
            #expect(ordinary.diagnostic == nil, "\(ordinary)")
        }
    }
}
