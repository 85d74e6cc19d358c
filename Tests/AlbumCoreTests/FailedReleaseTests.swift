#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import AlbumCore

/// A last release whose commit fails (a full disk): the size and times the
/// handle's writes gave the asset must not be forgotten, and the mark that
/// tells the next mount to take them from the data must not be erased by a
/// later open that writes nothing (SEMANTICS.md § Durability and safety).
@Suite("A release whose commit fails loses nothing")
struct FailedReleaseTests {
    /// Makes every commit of an open file's state fail as a full disk does, until `ends`.
    private struct FullDisk {
        init(_ library: Library) {
            library.pausePoints.install { point throws(LibraryError) in
                if point == .commitOfData { throw .noSpace }
            }
        }
        func ends(_ library: Library) { library.pausePoints.install(nil) }
    }

    private func stored(_ library: Library, _ id: NodeID) throws -> (size: Int64, marked: Bool) {
        try library.read { db in
            (try db.attributes(of: id)?.size ?? -1, try db.unfinishedWrites().contains(id))
        }
    }

    private func writeNew(_ store: TestStore, _ name: String, _ count: Int) throws -> (NodeID, OpenFile) {
        let id = try store.createFile(TestStore.roll, name)
        let file = try store.library.open(id, writable: true, truncate: false)
        let data = [UInt8](repeating: 9, count: count)
        _ = try data.withUnsafeBytes { try store.library.write(file, from: $0.baseAddress!, count: count, at: 0) }
        return (id, file)
    }

    /// A store whose `a.jpg` had 100 bytes written and a last release that
    /// could not commit (the disk full for good, the reserve spent too).
    private func afterAFailedRelease() throws -> (TestStore, NodeID) {
        let store = try TestStore()
        let (id, file) = try writeNew(store, "a.jpg", 100)
        let disk = FullDisk(store.library)
        #expect(throws: LibraryError.noSpace) { try store.library.release(file) }
        disk.ends(store.library)
        return (store, id)
    }

    @Test("a release that fails for space leaves the store's reserve to the deletes that empty a full library")
    func reserveKeptForDeletes() throws {
        let (store, _) = try afterAFailedRelease()
        #expect(pathExists(store.location.root + "/reserve"), "the failed release spent the reserve rm needs on a full disk")
    }

    @Test("a release that cannot commit keeps what stat showed and the mark; the next close of the file commits them")
    func keptUntilTheNextClose() throws {
        let (store, id) = try afterAFailedRelease()
        let library = store.library
        #expect(try library.attributes(of: id).size == 100, "stat fell back to the row written before")
        #expect(try stored(library, id) == (0, true))
        // An open that writes nothing: its close must not take the mark without the size.
        let again = try library.open(id, writable: true, truncate: false)
        try library.release(again)
        #expect(try stored(library, id) == (100, false))
        store.close()
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
    }

    @Test("what a failed release owes is committed by the next release that succeeds")
    func settledByTheNextRelease() throws {
        let (store, id) = try afterAFailedRelease()
        let library = store.library
        let (_, other) = try writeNew(store, "b.jpg", 10)
        try library.release(other)
        #expect(try stored(library, id) == (100, false))
        #expect(try store.reopen().attributes(of: id).size == 100)
    }

    @Test("a failed release's state survives into the next mount through its mark")
    func recoveredAtTheNextMount() throws {
        let (store, id) = try afterAFailedRelease()
        let reopened = try store.reopen()
        #expect(try reopened.attributes(of: id).size == 100)
        #expect(try stored(reopened, id) == (100, false))
    }
}
