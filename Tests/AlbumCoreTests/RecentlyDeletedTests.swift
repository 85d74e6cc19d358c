#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SQLiteKit
import Synchronization
import Testing
@testable import AlbumCore

private let roll = TestStore.roll
private let recentlyDeleted = FixedNode.recentlyDeleted
private let day: Nanoseconds = 86_400 * 1_000_000_000

extension TestStore {
    func rename(_ oldParent: NodeID, _ oldName: String, to newParent: NodeID, _ newName: String,
                by caller: Caller = TestStore.owner) throws {
        _ = try library.rename(oldParent, AlbumCoreTests.name(oldName), to: newParent, AlbumCoreTests.name(newName), by: caller)
    }

    func unlink(_ parent: NodeID, _ entry: String, by caller: Caller = TestStore.owner) throws {
        _ = try library.unlink(parent, AlbumCoreTests.name(entry), by: caller)
    }

    /// The owner's `.Trash-UID` and its directories, made by looking it up.
    func trash(_ caller: Caller = TestStore.owner) throws -> (top: NodeID, files: NodeID, info: NodeID, expunged: NodeID) {
        let top = try library.lookup(TestStore.root, AlbumCoreTests.name(".Trash-\(caller.uid)"), by: caller).id
        return (top, try id(top, "files")!, try id(top, "info")!, try id(top, "expunged")!)
    }

    func text(_ id: NodeID) throws -> String { String(decoding: try read(id), as: UTF8.self) }
}

/// SEMANTICS.md § Recently Deleted, and the file manager's trash, on the store alone.
@Suite("Recently Deleted: delete, restore, purge, expiry")
struct RecentlyDeletedTests {
    @Test("rm in the roll: gone from the roll and every album, in Recently Deleted with the same id, nlink 1, ctime = deletion")
    func deleteToRecentlyDeleted() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        let id = try store.createFile(a, "x.jpg", contents: bytes("photo"))
        _ = try store.library.link(id, into: b, named: name("bx.jpg"))
        let before = currentTime()
        try store.unlink(roll, "x.jpg")

        #expect(try store.names(roll).isEmpty)
        #expect(try store.names(a).isEmpty)
        #expect(try store.names(b).isEmpty)
        #expect(try store.id(recentlyDeleted, "x.jpg") == id)
        let attributes = try store.library.attributes(of: id)
        #expect(attributes.linkCount == 1)
        #expect(attributes.changeTime >= before)
        #expect(try store.read(id) == bytes("photo"), "a deleted asset stays readable")
        #expect(try assetCount(store) == 1, "statfs still counts it")
        #expect(store.dataSize(of: id) == 5)
        let deleted = String(decoding: try store.library.extendedAttribute(id, name("user.albumfs.deleted")), as: UTF8.self)
        let purge = String(decoding: try store.library.extendedAttribute(id, name("user.albumfs.purge")), as: UTF8.self)
        #expect(deleted.hasSuffix("Z") && deleted.count == 20, "\(deleted)")
        #expect(purge > deleted)

        // Restore: back in the roll and both albums, under the same names.
        try store.rename(recentlyDeleted, "x.jpg", to: roll, "x.jpg")
        #expect(try store.id(roll, "x.jpg") == id)
        #expect(try store.id(a, "x.jpg") == id)
        #expect(try store.id(b, "bx.jpg") == id)
        #expect(try store.names(recentlyDeleted).isEmpty)
        #expect(try store.library.attributes(of: id).linkCount == 3)
        #expect(throws: LibraryError.noAttribute) { try store.library.extendedAttribute(id, name("user.albumfs.deleted")) }
    }

    @Test("restore after an album went and another asset took the old name: new roll name, (n) in A, not in B")
    func restoreWithChangedAlbums() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        let id = try store.createFile(a, "x", contents: bytes("1"))
        _ = try store.library.link(id, into: b, named: name("x"))
        try store.unlink(roll, "x")
        _ = try store.library.removeAlbum(TestStore.albums, name("B"))
        let other = try store.createFile(a, "x", contents: bytes("2"))

        try store.rename(recentlyDeleted, "x", to: roll, "y")
        #expect(try store.id(roll, "y") == id)
        #expect(try store.id(roll, "x") == other)
        #expect(try store.id(a, "x") == other)
        #expect(try store.id(a, "x (2)") == id)
        #expect(try store.library.attributes(of: id).linkCount == 2)
    }

    @Test("a restore onto a taken roll name replaces it: that asset goes to Recently Deleted")
    func restoreOverRollEntry() throws {
        let store = try TestStore()
        let first = try store.createFile(roll, "x")
        try store.unlink(roll, "x")
        let second = try store.createFile(roll, "x")
        try store.rename(recentlyDeleted, "x", to: roll, "x")
        #expect(try store.id(roll, "x") == first)
        #expect(try store.id(recentlyDeleted, "x") == second)
    }

    @Test("mv from Recently Deleted into an album restores it into the roll and adds it there")
    func restoreIntoAlbum() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let c = try store.makeAlbum("C")
        let id = try store.createFile(a, "x")
        try store.unlink(roll, "x")
        try store.rename(recentlyDeleted, "x", to: c, "c.jpg")
        #expect(try store.id(roll, "x") == id)
        #expect(try store.id(a, "x") == id)
        #expect(try store.id(c, "c.jpg") == id)
    }

    @Test("a purge replies before its data is freed; statfs (df) and a create wait for the free")
    func purgeFreesDataAfterTheReply() throws {
        let store = try TestStore()
        let library = store.library
        let id = try store.createFile(roll, "x", contents: bytes("bytes"))
        try store.unlink(roll, "x")
        let freeMayRun = DispatchSemaphore(value: 0)
        let freeWasHeld = Mutex(false)
        library.pausePoints.install { point throws(LibraryError) in
            guard point == .freeingData else { return }
            // Held until the test lets it go (at most 10 s, so that a wrong
            // order shows as a failure, not a hang).
            let released = freeMayRun.wait(timeout: .now() + 10) == .success
            freeWasHeld.withLock { $0 = released }
        }
        defer { library.pausePoints.install(nil) }
        try store.unlink(recentlyDeleted, "x")
        #expect(library.content.size(of: id) == 5, "the unlink returned with its free still held: off the request's path")
        // statfs waits for the free: let it go only once statfs has started.
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(200)) { freeMayRun.signal() }
        _ = try library.statistics()
        #expect(library.content.size(of: id) == nil, "statfs returned before the purge's data was freed")
        #expect(freeWasHeld.withLock { $0 })
        // A create after a purge finds the space freed too.
        let other = try store.createFile(roll, "y", contents: bytes("other"))
        try store.unlink(roll, "y")
        try store.unlink(recentlyDeleted, "y")
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(200)) { freeMayRun.signal() }
        _ = try store.createFile(roll, "z")
        #expect(library.content.size(of: other) == nil, "a create returned before a purge's data was freed")
    }

    @Test("rm in Recently Deleted purges: data freed, the asset gone")
    func purge() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x", contents: bytes("bytes"))
        try store.unlink(roll, "x")
        try store.unlink(recentlyDeleted, "x")
        #expect(!store.exists(id))
        #expect(store.dataSize(of: id) == nil)
        #expect(try assetCount(store) == 0)
        #expect(try store.names(try store.trash().files).isEmpty)
        #expect(try store.names(try store.trash().info).isEmpty)
    }

    @Test("a purge leaves no row of the asset or of its .trashinfo (xattrs go by cascade), and schedules no free for a .trashinfo that never had a file")
    func purgeLeavesNothingBehind() throws {
        let store = try TestStore()
        let trash = try store.trash()
        let id = try store.createFile(roll, "x", contents: bytes("bytes"))
        try store.library.setExtendedAttribute(id, name("user.note"), bytes("n"), mode: .createOrReplace)
        try store.unlink(roll, "x")
        let info = try #require(try store.id(trash.info, "x.trashinfo"))
        try store.unlink(trash.files, "x")
        store.library.waitForFreedData()
        let left = try store.library.read { db in
            try ["xattrs WHERE node", "side_file_data WHERE node", "nodes WHERE id", "entries WHERE child"].map { rows in
                try db.scalarInt("SELECT count(*) FROM \(rows) IN (\(id), \(info))")
            }
        }
        #expect(left == [0, 0, 0, 0])
        #expect(try store.library.read { db in try db.scalarInt("SELECT count(*) FROM pending_purges WHERE id = \(info)") } == 0,
                "a free was scheduled for a .trashinfo whose data was in the database")
        #expect(store.dataSize(of: id) == nil)
    }

    @Test("a deleted asset is read-only: open for writing, truncate, chmod, setxattr: not permitted; nothing can be created there")
    func deletedIsReadOnly() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x", contents: bytes("keep"))
        try store.unlink(roll, "x")
        #expect(throws: LibraryError.notPermitted) { try store.library.open(id, writable: true, truncate: false) }
        #expect(throws: LibraryError.notPermitted) { try store.library.setAttributes(id, AttributeChanges(size: 0)) }
        #expect(throws: LibraryError.notPermitted) { try store.library.setAttributes(id, AttributeChanges(mode: 0o600)) }
        #expect(throws: LibraryError.notPermitted) {
            try store.library.setExtendedAttribute(id, name("user.a"), [], mode: .createOrReplace)
        }
        #expect(throws: LibraryError.notPermitted) {
            try store.library.createAsset(in: recentlyDeleted, named: name("new"), mode: 0o644, by: TestStore.owner)
        }
        #expect(throws: LibraryError.notPermitted) {
            try store.library.link(id, into: try store.makeAlbum("A"), named: name("x"))
        }
        #expect(try store.read(id) == bytes("keep"))
    }

    @Test("update rule (SEMANTICS.md § Edits keep the original): the first version is kept as the original, a later one goes to Recently Deleted with no albums")
    func updateToRecentlyDeleted() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let first = try store.createFile(a, "x.jpg", contents: bytes("first"))
        let second = try store.createFile(a, ".x.jpg.tmp", contents: bytes("second"))
        try store.rename(a, ".x.jpg.tmp", to: a, "x.jpg")
        #expect(try store.id(a, "x.jpg") == second)
        #expect(try store.id(roll, "x.jpg") == second)
        #expect(try store.names(recentlyDeleted).isEmpty, "the first version is the original, not deleted")
        let third = try store.createFile(a, ".x.jpg.tmp", contents: bytes("third"))
        try store.rename(a, ".x.jpg.tmp", to: a, "x.jpg")
        #expect(try store.id(a, "x.jpg") == third)
        #expect(try store.id(recentlyDeleted, "x.jpg") == second)
        // Restored, it comes back to the roll only, as an asset of its own.
        try store.rename(recentlyDeleted, "x.jpg", to: roll, "old.jpg")
        #expect(try store.id(roll, "old.jpg") == second)
        #expect(try store.names(a) == [name("x.jpg")])
        #expect(try store.library.attributes(of: second).linkCount == 1)
        #expect(try store.library.extendedAttribute(second, name("user.albumfs.asset")) == bytes(String(second)))
        #expect(try store.library.extendedAttribute(third, name("user.albumfs.asset")) == bytes(String(first)))
    }

    @Test("expiry: an asset deleted longer ago than trash_days is purged when the store opens; a newer one stays")
    func expiryAtOpen() throws {
        let store = try TestStore(options: LibraryOptions(trashDays: 30, clockOffset: -31 * day))
        let old = try store.createFile(roll, "old", contents: bytes("old"))
        try store.unlink(roll, "old")
        try store.reopen(options: LibraryOptions(trashDays: 30))
        #expect(!store.exists(old), "deleted 31 days ago by the store's clock")
        #expect(store.dataSize(of: old) == nil)
        let recent = try store.createFile(roll, "recent")
        try store.unlink(roll, "recent")
        try store.reopen(options: LibraryOptions(trashDays: 30))
        #expect(try store.id(recentlyDeleted, "recent") == recent, "deleted just now")
        // While open: the periodic check purges what expires.
        #expect(try store.library.purgeExpired(batch: 500, at: currentTime() + 29 * day).isEmpty)
        #expect(store.exists(recent))
        let changes = try store.library.purgeExpired(batch: 500, at: currentTime() + 30 * day + 1)
        #expect(!store.exists(recent))
        #expect(changes.directories.contains(recentlyDeleted))
    }

    @Test("trash_days=0: no trash is offered, and what Recently Deleted held is purged at mount")
    func noRetention() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x")
        try store.unlink(roll, "x")
        try store.reopen(options: .purgeAtOnce)
        #expect(!store.exists(id))
        #expect(throws: LibraryError.notFound) {
            try store.library.lookup(TestStore.root, name(".Trash-1000"), by: TestStore.owner)
        }
    }

    @Test("fsck passes on a store with deleted, restored and purged assets")
    func fsckKnowsRecentlyDeleted() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        for n in 0..<4 { try store.createFile(a, "p\(n)", contents: bytes("data \(n)")) }
        try store.unlink(roll, "p0")
        try store.unlink(roll, "p1")
        try store.rename(recentlyDeleted, "p1", to: roll, "p1")
        try store.unlink(roll, "p2")
        try store.unlink(recentlyDeleted, "p2")
        // The album of a deleted asset goes: restoring it later drops that membership, no error.
        try store.unlink(a, "p3")
        store.close()
        let problems = try StoreChecker(location: store.location).check(repair: false)
        #expect(problems.isEmpty, "\(problems)")
    }
}

@Suite("The file manager's trash: .Trash-UID, files/, info/, expunged/")
struct TrashTests {
    let other = Caller(uid: 1001, gid: 1001)

    @Test(".Trash-UID: found by lookup by its uid (owner, 0700), never listed, not made for another uid")
    func lookupMakesTrash() throws {
        let store = try TestStore()
        #expect(throws: LibraryError.notFound) {
            try store.library.lookup(TestStore.root, name(".Trash-1000"), by: other)
        }
        let attributes = try store.library.lookup(TestStore.root, name(".Trash-1000"), by: TestStore.owner)
        #expect(attributes.kind == .trash && attributes.mode == 0o700 && attributes.uid == 1000)
        #expect(try store.sortedNames(TestStore.root) == ["Albums", "By Date", "Camera Roll", "Hidden", "Recently Deleted", "Smart Albums"])
        #expect(try store.sortedNames(attributes.id) == ["expunged", "files", "info"])
        // Once made, every lookup finds it (the kernel's permission check keeps others out).
        #expect(try store.library.lookup(TestStore.root, name(".Trash-1000"), by: other).id == attributes.id)
        #expect(throws: LibraryError.notFound) { try store.library.lookup(TestStore.root, name(".Trash-01000"), by: other) }
        #expect(throws: LibraryError.notPermitted) {
            try store.library.makeAlbum(in: TestStore.root, named: name(".Trash-1001"), mode: 0o700, by: other)
        }
    }

    @Test("rm in the roll writes the .trashinfo GIO would, in the deleter's trash; restoring from Recently Deleted removes both")
    func rmWritesTrashInfo() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "a b.jpg")
        try store.createFile(roll, "c")
        try store.unlink(roll, "a b.jpg")
        let trash = try store.trash()
        #expect(try store.id(trash.files, "a b.jpg") == id)
        let info = try store.text(try store.id(trash.info, "a b.jpg.trashinfo")!)
        #expect(info.hasPrefix("[Trash Info]\nPath=Camera%20Roll/a%20b.jpg\nDeletionDate=20"), "\(info)")
        // Another deletion of that name: GIO's second name.
        let second = try store.createFile(roll, "a b.jpg")
        try store.unlink(roll, "a b.jpg")
        #expect(try store.id(trash.files, "a b.2.jpg") == second)
        #expect(try store.id(recentlyDeleted, "a b (2).jpg") == second)
        try store.rename(recentlyDeleted, "a b.jpg", to: roll, "a b.jpg")
        #expect(try store.sortedNames(trash.files) == ["a b.2.jpg"])
        #expect(try store.sortedNames(trash.info) == ["a b.2.jpg.trashinfo"])
    }

    @Test("an rm makes no node for its .trashinfo: it is written when first needed (a lookup or a listing in info/), with the deletion's date, owned by the trash's owner")
    func trashInfoWrittenWhenFirstNeeded() throws {
        let store = try TestStore(options: LibraryOptions(trashDays: 30, clockOffset: -2 * day))
        let trash = try store.trash()
        try store.createFile(roll, "a.jpg")
        try store.createFile(roll, "b.jpg")
        try store.unlink(roll, "a.jpg")
        try store.unlink(roll, "b.jpg")
        func sideFileNodes() throws -> Int64 {
            try store.library.read { db in try db.scalarInt("SELECT count(*) FROM nodes WHERE kind = \(NodeKind.sideFile.rawValue)") }
        }
        #expect(try sideFileNodes() == 0, "a delete writes no .trashinfo")
        // Looked at two days later (by the store's clock), the info shows when it was deleted.
        let deletedOn = Self.localDate(Nanoseconds(time(nil)) * 1_000_000_000 - 2 * day)
        try store.reopen(options: LibraryOptions(trashDays: 30))
        let info = try #require(try store.id(trash.info, "a.jpg.trashinfo"))
        #expect(try store.text(info).hasPrefix("[Trash Info]\nPath=Camera%20Roll/a.jpg\nDeletionDate=\(deletedOn)T"))
        #expect(try sideFileNodes() == 2, "the first lookup writes every info of that trash")
        let attributes = try store.library.attributes(of: info)
        #expect((attributes.uid, attributes.gid, attributes.mode & 0o777) == (TestStore.owner.uid, TestStore.owner.gid, 0o600))
        #expect(try store.sortedNames(trash.info) == ["a.jpg.trashinfo", "b.jpg.trashinfo"])
    }

    @Test("a listing of info/ writes them too; a purge of an item whose info nobody looked at removes no node but the asset's")
    func unwrittenTrashInfoAndPurge() throws {
        let store = try TestStore()
        let trash = try store.trash()
        let a = try store.createFile(roll, "a.jpg", contents: bytes("a"))
        try store.createFile(roll, "b.jpg")
        try store.unlink(roll, "a.jpg")
        try store.unlink(roll, "b.jpg")
        func nodes() throws -> Int64 { try store.library.read { db in try db.scalarInt("SELECT count(*) FROM nodes") } }
        let before = try nodes()
        try store.unlink(trash.files, "a.jpg")
        #expect(try nodes() == before - 1)
        store.library.waitForFreedData()
        #expect(try store.library.read { db in try db.scalarInt("SELECT count(*) FROM pending_purges WHERE id <> \(a)") } == 0)
        #expect(try store.sortedNames(trash.info) == ["b.jpg.trashinfo"])
        #expect(try store.sortedNames(recentlyDeleted) == ["b.jpg"])
    }

    @Test("GIO's exclusive create of an info albumfs has still to write: EEXIST, so GIO takes its second name")
    func exclusiveCreateOverUnwrittenTrashInfo() throws {
        let store = try TestStore()
        let trash = try store.trash()
        try store.createFile(roll, "x.jpg")
        try store.unlink(roll, "x.jpg")
        #expect(throws: LibraryError.exists) {
            try store.library.createAsset(in: trash.info, named: name("x.jpg.trashinfo"), mode: 0o644, by: TestStore.owner)
        }
        try store.createFile(trash.info, "x.2.jpg.trashinfo")
        #expect(try store.sortedNames(trash.info) == ["x.2.jpg.trashinfo", "x.jpg.trashinfo"])
    }

    static func localDate(_ time: Nanoseconds) -> String {
        var seconds = time_t(time / 1_000_000_000)
        var local = tm()
        localtime_r(&seconds, &local)
        return String(format: "%04d-%02d-%02d", Int(local.tm_year) + 1900, Int(local.tm_mon) + 1, Int(local.tm_mday))
    }

    @Test("GIO's trash of a roll entry: exclusive info create, info written by rename-over, file renamed into files/")
    func gioTrashFromRoll() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(a, "x.jpg", contents: bytes("photo"))
        let trash = try store.trash()
        // GIO: open(info/x.jpg.trashinfo, O_CREAT|O_EXCL), then g_file_set_contents.
        try store.createFile(trash.info, "x.jpg.trashinfo")
        #expect(throws: LibraryError.exists) {
            try store.library.createAsset(in: trash.info, named: name("x.jpg.trashinfo"), mode: 0o644, by: TestStore.owner)
        }
        try store.createFile(trash.info, "x.jpg.trashinfo.AB12CD", contents: bytes("[Trash Info]\nPath=Camera%20Roll/x.jpg\n"))
        try store.rename(trash.info, "x.jpg.trashinfo.AB12CD", to: trash.info, "x.jpg.trashinfo")
        #expect(try store.sortedNames(trash.info) == ["x.jpg.trashinfo"])
        #expect(try assetCount(store) == 1, "info files are no assets")
        try store.rename(roll, "x.jpg", to: trash.files, "x.jpg")

        #expect(try store.names(roll).isEmpty)
        #expect(try store.names(a).isEmpty)
        #expect(try store.id(recentlyDeleted, "x.jpg") == id)
        #expect(try store.id(trash.files, "x.jpg") == id)
        #expect(try store.sortedNames(trash.info) == ["x.jpg.trashinfo"], "albumfs writes no second info")
        // Restore (GIO renames back, then deletes the info: already gone).
        try store.rename(trash.files, "x.jpg", to: roll, "x.jpg")
        #expect(try store.id(a, "x.jpg") == id)
        #expect(try store.names(trash.files).isEmpty)
        #expect(try store.names(trash.info).isEmpty)
        #expect(try store.names(recentlyDeleted).isEmpty)
    }

    @Test("trash of an album entry removes that reference only; restore puts it back; emptying forgets it")
    func trashAlbumEntry() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(a, "x", contents: bytes("x"))
        let trash = try store.trash()
        try store.rename(a, "x", to: trash.files, "x")
        #expect(try store.names(a).isEmpty)
        #expect(try store.id(roll, "x") == id)
        #expect(try store.library.attributes(of: id).linkCount == 1)
        try store.rename(trash.files, "x", to: a, "x")
        #expect(try store.id(a, "x") == id)
        #expect(try store.library.attributes(of: id).linkCount == 2)
        // Again, then Empty Trash (GIO: rename into expunged/, then delete what is there).
        try store.rename(a, "x", to: trash.files, "x")
        try store.rename(trash.files, "x", to: trash.expunged, "12345")
        #expect(try store.names(trash.expunged).isEmpty)
        #expect(try store.names(trash.files).isEmpty)
        #expect(try store.id(roll, "x") == id, "emptying the trash never deletes an asset in the roll")
        #expect(store.dataSize(of: id) == 1)
    }

    @Test("a trashed reference whose asset was deleted meanwhile cannot be restored until the asset is; it goes with the purge")
    func trashedReferenceOfDeletedAsset() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(a, "x")
        let trash = try store.trash()
        try store.rename(a, "x", to: trash.files, "x")
        try store.unlink(roll, "x")
        #expect(try store.sortedNames(trash.files) == ["x", "x.2"], "the reference, and the deleted asset")
        #expect(throws: LibraryError.notFound) { try store.rename(trash.files, "x", to: a, "x") }
        try store.unlink(recentlyDeleted, "x")
        #expect(try store.names(trash.files).isEmpty)
        #expect(!store.exists(id))
    }

    @Test("trash of an album: gone with its entries and sub-albums (links drop), restored whole; emptying forgets it, no asset deleted")
    func trashWholeAlbum() throws {
        let store = try TestStore()
        let trip = try store.makeAlbum("Trip")
        let day1 = try store.makeAlbum(trip, "Day 1")
        let p = try store.createFile(trip, "p")
        let q = try store.createFile(day1, "q")
        let trash = try store.trash()
        try store.rename(TestStore.albums, "Trip", to: trash.files, "Trip")
        #expect(try store.names(TestStore.albums).isEmpty)
        #expect(try store.library.attributes(of: p).linkCount == 1)
        #expect(try store.library.attributes(of: q).linkCount == 1)
        #expect(throws: LibraryError.notPermitted) {
            try store.library.createAsset(in: trip, named: name("new"), mode: 0o644, by: TestStore.owner)
        }
        // q is deleted while its album is in the trash: its restore brings it back there later.
        try store.unlink(roll, "q")
        try store.rename(trash.files, "Trip", to: TestStore.albums, "Trip")
        #expect(try store.id(trip, "p") == p)
        #expect(try store.id(trip, "Day 1") == day1)
        #expect(try store.names(day1).isEmpty)
        try store.rename(recentlyDeleted, "q", to: roll, "q")
        #expect(try store.id(day1, "q") == q)

        // Trash it again and empty the trash (rmdir of what appears empty, as rm -r does).
        try store.rename(TestStore.albums, "Trip", to: trash.files, "Trip")
        _ = try store.library.removeAlbum(trash.files, name("Trip"))
        #expect(try store.names(trash.files).isEmpty)
        #expect(!store.exists(trip) && !store.exists(day1))
        #expect(try store.library.attributes(of: p).linkCount == 1 && store.exists(q))
        store.close()
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
    }

    @Test("unlink in files/ purges a deleted asset; expunged/ takes anything and shows nothing")
    func emptyTrash() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x", contents: bytes("gone"))
        try store.unlink(roll, "x")
        let trash = try store.trash()
        try store.unlink(trash.files, "x")
        #expect(!store.exists(id))
        #expect(store.dataSize(of: id) == nil)
        #expect(try store.names(recentlyDeleted).isEmpty)
        #expect(try store.names(trash.info).isEmpty)
    }

    @Test("300 assets deleted and purged: each delete and purge stays one transaction and fsck passes")
    func manyDeletes() throws {
        let store = try TestStore()
        for n in 0..<300 { try store.createFile(roll, "p\(n)") }
        for n in 0..<300 { try store.unlink(roll, "p\(n)") }
        #expect(try store.names(recentlyDeleted).count == 300)
        let trash = try store.trash()
        #expect(try store.names(trash.files).count == 300)
        for n in 0..<300 { try store.unlink(trash.files, "p\(n)") }
        #expect(try store.names(recentlyDeleted).isEmpty)
        store.close()
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
    }
}

@Suite("Schema v3: a store made before Recently Deleted")
struct RecentlyDeletedMigrationTests {
    @Test("a v2 store is migrated at open: Recently Deleted appears, assets and albums are intact, deletes go there")
    func migrateVersion2() throws {
        let store = try TestStore(openLibrary: false)
        // A store as the previous release left it: schema v2, the three fixed directories, one asset in an album.
        mkdir(store.location.root, 0o700)
        let content = ContentStore(directory: store.location.contentPath)
        try content.createLayout()
        #expect(FileManager.default.createFile(atPath: content.markerPath, contents: Data()))
        do {
            let db = try Database(path: store.location.databasePath, mode: .readWriteCreate)
            _ = try Migrator(Array(Schema.migrator.migrations.prefix(2))).migrate(db)
            try db.execute("""
                INSERT INTO nodes(id, kind, parent, mode, uid, gid, atime, mtime, ctime, imported) VALUES
                    (1, 0, NULL, 493, 1000, 1000, 1, 1, 1, 1), (2, 1, 1, 493, 1000, 1000, 1, 1, 1, 1),
                    (3, 2, 1, 493, 1000, 1000, 1, 1, 1, 1), (17, 4, 3, 493, 1000, 1000, 1, 1, 1, 1),
                    (18, 5, NULL, 420, 1000, 1000, 1, 1, 1, 1);
                UPDATE nodes SET size = 5 WHERE id = 18;
                INSERT INTO entries(parent, name, child) VALUES
                    (1, CAST('Camera Roll' AS BLOB), 2), (1, CAST('Albums' AS BLOB), 3),
                    (3, CAST('A' AS BLOB), 17), (2, CAST('x.jpg' AS BLOB), 18), (17, CAST('x.jpg' AS BLOB), 18);
                UPDATE sqlite_sequence SET seq = 18 WHERE name = 'nodes';
                """)
            #expect(try Migrator.version(of: db) == 2)
        }
        try content.create(18, contents: bytes("photo"), modified: currentTime())

        try store.reopen()
        #expect(try store.sortedNames(TestStore.root) == ["Albums", "By Date", "Camera Roll", "Hidden", "Recently Deleted", "Smart Albums"])
        #expect(try store.id(17, "x.jpg") == 18)
        #expect(try store.read(18) == bytes("photo"))
        #expect(try store.library.attributes(of: 18).linkCount == 2)
        try store.unlink(roll, "x.jpg")
        #expect(try store.id(recentlyDeleted, "x.jpg") == 18)
        try store.rename(recentlyDeleted, "x.jpg", to: roll, "x.jpg")
        #expect(try store.id(17, "x.jpg") == 18)
        store.close()
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
    }

    @Test("fsck: a deleted asset missing from Recently Deleted is reported, and --repair puts it back there")
    func fsckRepairsRecentlyDeleted() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x", contents: bytes("x"))
        try store.unlink(roll, "x")
        store.close()
        let db = try Database(path: store.location.databasePath, mode: .readWrite)
        try db.execute("DELETE FROM entries WHERE parent = \(recentlyDeleted)")
        let problems = try StoreChecker(location: store.location).check(repair: true)
        #expect(problems.count == 1 && problems[0].description.contains("not in Recently Deleted"), "\(problems)")
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
        try store.reopen()
        #expect(try store.id(recentlyDeleted, "recovered-\(id)") == id)
    }
}
