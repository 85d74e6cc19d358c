#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SQLiteKit
import Testing
@testable import AlbumCore

private let roll = TestStore.roll
private let albums = TestStore.albums

/// Asserts that `body` fails with `.unusableStore` and returns its message.
@discardableResult
func expectUnusableStore(_ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation,
                         _ body: () throws -> Void) -> String? {
    let error = #expect(throws: LibraryError.self, comment, sourceLocation: sourceLocation) { try body() }
    guard case .unusableStore(let message)? = error else {
        Issue.record("expected .unusableStore, got \(String(describing: error))", sourceLocation: sourceLocation)
        return nil
    }
    #expect(!message.isEmpty, sourceLocation: sourceLocation)
    #expect(!message.contains("\n"), "the reason is one line", sourceLocation: sourceLocation)
    return message
}

@Suite("Store: persistence, lock, format checks")
struct StoreTests {
    @Test("a new store has a database, a content directory with 256 fan-out directories, mode 0700")
    func newStoreLayout() throws {
        let store = try TestStore()
        #expect(pathExists(store.location.databasePath))
        #expect(pathExists(store.location.contentPath))
        #expect(pathExists(store.location.contentPath + "/00"))
        #expect(pathExists(store.location.contentPath + "/ff"))
        let subdirectories = try FileManager.default.contentsOfDirectory(atPath: store.location.contentPath)
            .filter { $0.utf8.count == 2 && $0.allSatisfy(\.isHexDigit) }
        #expect(subdirectories.count == 256)
        var info = stat()
        #expect(stat(store.location.root, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700)
    }

    @Test("a store location is made absolute and loses trailing slashes")
    func locationPaths() throws {
        let location = StoreLocation(path: "/tmp/some/store//")
        #expect(location.root == "/tmp/some/store")
        #expect(location.databasePath == "/tmp/some/store/library.sqlite")
        #expect(location.contentPath == "/tmp/some/store/content")
        let relative = StoreLocation(path: "relative/store")
        #expect(relative.root.hasPrefix("/"))
        #expect(relative.root.hasSuffix("/relative/store"))
        #expect(StoreLocation.defaultPath(environment: ["XDG_DATA_HOME": "/x", "HOME": "/h"]) == "/x/albumfs")
        #expect(StoreLocation.defaultPath(environment: ["HOME": "/h"]) == "/h/.local/share/albumfs")
        #expect(StoreLocation.defaultPath(environment: [:]) == nil)
    }

    @Test("a reopen keeps ids, names (byte for byte), albums and data")
    func reopenKeepsEverything() throws {
        let store = try TestStore()
        let trips = try store.makeAlbum("Trips")
        let paris = try store.makeAlbum(trips, "Paris")
        let invalid: Name = [0xff, 0xfe]
        let decomposed = name("e\u{301}.jpg")
        let one = try store.createFile(roll, invalid, contents: bytes("one"))
        let two = try store.createFile(paris, decomposed, contents: bytes("two"))
        _ = try store.library.link(one, into: paris, named: [0x80, 0x41])
        let rollBefore = try store.names(roll)
        let parisBefore = try store.names(paris)

        try store.reopen()

        #expect(try store.names(roll) == rollBefore)
        #expect(try store.names(paris) == parisBefore)
        #expect(try store.id(roll, invalid) == one)
        #expect(try store.id(roll, decomposed) == two)
        #expect(try store.id(paris, [0x80, 0x41]) == one)
        #expect(try store.id(albums, "Trips") == trips)
        #expect(try store.id(trips, "Paris") == paris)
        #expect(try store.library.attributes(of: one).linkCount == 2)
        #expect(try store.read(one) == bytes("one"))
        #expect(try store.read(two) == bytes("two"))
        // New ids continue above the old ones, never reusing one.
        _ = try store.library.unlink(roll, decomposed)
        try store.reopen()
        let three = try store.createFile(roll, "three")
        #expect(three > two)
        #expect(three > paris)
    }

    @Test("ids are never reused after a delete")
    func idsNotReused() throws {
        let store = try TestStore()
        let first = try store.createFile(roll, "a")
        _ = try store.library.unlink(roll, name("a"))
        let second = try store.createFile(roll, "a")
        #expect(second > first)
    }

    @Test("a store that is not there, or an empty directory, is refused and left as it was (SEMANTICS.md § Durability and safety)",
          arguments: ["missing", "empty directory"])
    func namedStoreNeverCreatedByAccident(_ how: String) throws {
        let store = try TestStore(openLibrary: false)
        if how == "empty directory" { #expect(mkdir(store.location.root, 0o755) == 0) }
        let message = expectUnusableStore { _ = try Library(location: store.location, owner: TestStore.owner) }
        #expect(message?.contains("albumfs init") == true, "the refusal says how to create one: \(message ?? "")")
        if how == "missing" {
            #expect(!pathExists(store.location.root))
        } else {
            #expect(try FileManager.default.contentsOfDirectory(atPath: store.location.root).isEmpty)
        }
    }

    @Test("a second StoreLock on the same store: unusable store, until the first is released")
    func storeLockExclusive() throws {
        let store = try TestStore()
        var first: StoreLock? = try StoreLock(location: store.location)
        let message = expectUnusableStore { _ = try StoreLock(location: store.location) }
        #expect(message?.contains("in use") == true)
        withExtendedLifetime(first) {}   // held until here, then released
        first = nil
        _ = try StoreLock(location: store.location)
    }

    @Test("a store of a newer format is refused")
    func newerFormatRefused() throws {
        let store = try TestStore()
        store.close()
        do {
            let db = try Database(path: store.location.databasePath, mode: .readWrite)
            try db.execute("PRAGMA user_version = 99")
        }
        let message = expectUnusableStore {
            _ = try Library(location: store.location, owner: TestStore.owner)
        }
        #expect(message?.contains("99") == true)
        // It was left as it was.
        let db = try Database(path: store.location.databasePath, mode: .readOnly)
        #expect(try Migrator.version(of: db) == 99)
    }

    @Test("a garbage database file is refused")
    func garbageDatabaseRefused() throws {
        let store = try TestStore()
        store.close()
        unlink(store.location.walPath)
        unlink(store.location.databasePath + "-shm")
        let garbage = [UInt8](repeating: 0x5a, count: 8192)
        #expect(FileManager.default.createFile(atPath: store.location.databasePath, contents: Data(garbage)))
        expectUnusableStore {
            _ = try Library(location: store.location, owner: TestStore.owner)
        }
    }

    @Test("a store whose content directory is gone is refused")
    func missingContentRefused() throws {
        let store = try TestStore()
        try store.createFile(roll, "x", contents: bytes("data"))
        store.close()
        try FileManager.default.removeItem(atPath: store.location.contentPath)
        let message = expectUnusableStore {
            _ = try Library(location: store.location, owner: TestStore.owner)
        }
        #expect(message?.contains("content") == true)
        // Nothing was recreated.
        #expect(!pathExists(store.location.contentPath))
    }

    @Test("a store whose database is gone is refused")
    func missingDatabaseRefused() throws {
        let store = try TestStore()
        store.close()
        unlink(store.location.walPath)
        unlink(store.location.databasePath + "-shm")
        #expect(unlink(store.location.databasePath) == 0)
        expectUnusableStore {
            _ = try Library(location: store.location, owner: TestStore.owner)
        }
        #expect(!pathExists(store.location.databasePath))
    }

    @Test("a store path that is a file is refused")
    func storeIsAFile() throws {
        let store = try TestStore(openLibrary: false)
        #expect(FileManager.default.createFile(atPath: store.location.root, contents: Data("x".utf8)))
        expectUnusableStore {
            _ = try Library(location: store.location, owner: TestStore.owner)
        }
    }

    @Test("a database with no root directory is refused")
    func databaseWithoutRoot() throws {
        let store = try TestStore()
        store.close()
        do {
            let db = try Database(path: store.location.databasePath, mode: .readWrite)
            try db.execute("PRAGMA foreign_keys = OFF; DELETE FROM nodes WHERE id = \(FixedNode.root);")
        }
        expectUnusableStore {
            _ = try Library(location: store.location, owner: TestStore.owner)
        }
    }

    @Test("statfs counts assets and reports the store's space")
    func statistics() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        try store.createFile(a, "x")
        try store.createFile(roll, "y")
        let statistics = try store.library.statistics()
        #expect(statistics.files - statistics.freeFiles == 2)
        #expect(statistics.blockSize > 0)
        #expect(statistics.blocks >= statistics.freeBlocks)
        #expect(statistics.freeBlocks >= statistics.availableBlocks)
    }

    @Test("data left by a create that never committed is gone after the next open, and its id starts empty")
    func uncommittedCreateLeftoverCleaned() throws {
        let store = try TestStore()
        let kept = try store.createFile(roll, "kept", contents: bytes("kept"))
        store.close()
        // The daemon died after creating the next asset's content file but
        // before its transaction committed: a file for an id nothing points at.
        let content = ContentStore(directory: store.location.contentPath)
        // One transaction may have made several, with ids without data between.
        let leftovers = [kept + 1, kept + 3, kept + 9]
        for leftover in leftovers {
            #expect(FileManager.default.createFile(atPath: content.path(of: leftover), contents: Data("partial".utf8)))
        }

        let library = try store.reopen()

        for leftover in leftovers {
            #expect(library.content.size(of: leftover) == nil,
                    "SEMANTICS: no data without an entry after the next mount's clean-up (id last+\(leftover - kept))")
        }
        #expect(library.content.size(of: kept) == 4)
        #expect(try store.read(kept) == bytes("kept"))
        // A new asset never shows the leftover bytes, whatever id it gets.
        let fresh = try store.createFile(roll, "fresh")
        #expect(try store.library.attributes(of: fresh).size == 0)
        #expect(store.dataSize(of: fresh) == 0)
        #expect(try store.read(fresh) == [])
    }

    @Test("a generated store (albumfs make-store) is made through the library: fsck finds it consistent, the album holds the first K")
    func generatedStore() throws {
        let store = try TestStore()
        let ids = try #require(try store.library.generateAssets(count: 300, size: 4096, albumName: name("Big"), albumSize: 20, by: TestStore.owner))
        #expect(ids.count == 300)
        #expect(try store.names(roll).count == 300)
        let big = try #require(try store.id(TestStore.albums, "Big"))
        #expect(try store.sortedNames(big) == (0..<20).map { "IMG_\(String(repeating: "0", count: 7 - String($0).count))\($0).JPG" })
        #expect(try store.library.attributes(of: ids.lowerBound).size == 4096)
        #expect(throws: LibraryError.exists) {
            try store.library.generateAssets(count: 1, size: 0, albumName: nil, albumSize: 0, by: TestStore.owner)
        }
        store.close()
        let problems = try StoreChecker(location: store.location).check(repair: false)
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test("transfers a crash cut short are finished or undone at the next open (SEMANTICS.md § Remote storage)")
    func transfersCutByACrash() throws {
        let store = try TestStore()
        let kept = try store.createFile(roll, "kept.jpg", contents: bytes("still mine"))
        let gone = try store.createFile(roll, "gone.jpg", contents: bytes("in the bucket"))
        store.close()
        let content = ContentStore(directory: store.location.contentPath)
        // An eviction set `kept`'s data aside and died before its commit: it comes back.
        try content.setAsideForEviction(kept)
        // One that committed: the set-aside data of `gone` is removed.
        try content.setAsideForEviction(gone)
        do {
            let db = try Database(path: store.location.databasePath, mode: .readWrite)
            try db.execute("INSERT INTO evicted(asset) VALUES (\(gone))")
        }
        // A fetch cut short leaves a partial file.
        let partial = try content.createFetchFile(gone)
        close(partial)
        let library = try store.reopen()
        #expect(try store.read(kept) == bytes("still mine"), "the data an uncommitted eviction set aside was lost")
        #expect(library.content.leftoverTransfers().evicting.isEmpty && library.content.leftoverTransfers().fetching.isEmpty)
        #expect(library.content.size(of: gone) == nil)
        #expect(try library.attributes(of: gone).isRemoteOnly)
    }
}
