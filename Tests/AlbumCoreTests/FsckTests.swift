#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SQLiteKit
import Testing
@testable import AlbumCore

private let roll = TestStore.roll

/// A store with a few assets holding data, closed (as fsck expects it).
private func populatedStore() throws -> (TestStore, [NodeID]) {
    let store = try TestStore()
    let a = try store.makeAlbum("A")
    let one = try store.createFile(roll, "one.jpg", contents: bytes("first asset"))
    let two = try store.createFile(a, "two.jpg", contents: bytes("second"))
    let three = try store.createFile(a, "empty.jpg")
    store.close()
    return (store, [one, two, three])
}

@Suite("fsck: the database against the content directory")
struct FsckTests {
    @Test("a healthy store has no problems, with or without repair")
    func healthyStore() throws {
        let (store, _) = try populatedStore()
        let checker = StoreChecker(location: store.location)
        let problems = try checker.check(repair: false)
        #expect(problems.isEmpty, "\(problems)")
        #expect(try checker.check(repair: true).isEmpty)
        #expect(!pathExists(store.location.root + "/lost+found"))
    }

    @Test("a fresh, empty store has no problems")
    func emptyStore() throws {
        let store = try TestStore()
        store.close()
        let problems = try StoreChecker(location: store.location).check(repair: false)
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test("a healthy store is also clean while a library has it open")
    func healthyWhileOpen() throws {
        let store = try TestStore()
        try store.createFile(roll, "x", contents: bytes("x"))
        let problems = try StoreChecker(location: store.location).check(repair: false)
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test("an extra file in content/xx/ is an orphan; repair moves it to lost+found")
    func orphanMovedToLostAndFound() throws {
        let (store, ids) = try populatedStore()
        let orphan = store.location.contentPath + "/07/stray-file"
        #expect(FileManager.default.createFile(atPath: orphan, contents: Data("stray".utf8)))
        let checker = StoreChecker(location: store.location)

        let problems = try checker.check(repair: false)
        #expect(problems.count == 1)
        #expect(problems.first?.description.contains("stray-file") == true)
        #expect(problems.first?.repair != nil)
        #expect(pathExists(orphan), "a check without repair changes nothing")

        let repaired = try checker.check(repair: true)
        #expect(repaired.count == 1)
        #expect(!pathExists(orphan))
        let lostAndFound = store.location.root + "/lost+found"
        let moved = try FileManager.default.contentsOfDirectory(atPath: lostAndFound)
        #expect(moved.count == 1)
        #expect(moved.first?.hasPrefix("stray-file") == true)
        if let first = moved.first {
            #expect(FileManager.default.contents(atPath: lostAndFound + "/" + first) == Data("stray".utf8))
        }
        #expect(try checker.check(repair: false).isEmpty)
        // The assets are untouched.
        let library = try store.reopen()
        #expect(try store.read(ids[0]) == bytes("first asset"))
        #expect(try library.attributes(of: ids[1]).size == 6)
    }

    @Test("a content file named after an unknown id, or in the wrong fan-out directory, is an orphan")
    func orphanIdNames() throws {
        let (store, ids) = try populatedStore()
        let content = ContentStore(directory: store.location.contentPath)
        // An id the database never had.
        let unknown = content.path(of: 0xabcdef)
        #expect(FileManager.default.createFile(atPath: unknown, contents: Data()))
        // A real asset's file name, copied into the wrong fan-out directory.
        let realName = content.path(of: ids[0]).split(separator: "/").last.map(String.init)!
        let wrongFanOut = content.fanOutName(of: ids[0]) == "00" ? "01" : "00"
        let misplaced = "\(store.location.contentPath)/\(wrongFanOut)/\(realName)"
        #expect(FileManager.default.createFile(atPath: misplaced, contents: Data("first asset".utf8)))

        let problems = try StoreChecker(location: store.location).check(repair: true)
        #expect(problems.count == 2, "\(problems)")
        #expect(!pathExists(unknown))
        #expect(!pathExists(misplaced))
        #expect(pathExists(content.path(of: ids[0])), "the real content file stays")
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
    }

    @Test("a missing content file is reported and never repaired away")
    func missingContent() throws {
        let (store, ids) = try populatedStore()
        let content = ContentStore(directory: store.location.contentPath)
        #expect(unlink(content.path(of: ids[1])) == 0)
        let problems = try StoreChecker(location: store.location).check(repair: true)
        #expect(problems.count == 1, "\(problems)")
        #expect(problems.first?.description.contains("\(ids[1])") == true)
        #expect(problems.first?.repair == nil)
        // Still reported: repair did not delete the asset.
        #expect(try StoreChecker(location: store.location).check(repair: false).count == 1)
        let library = try store.reopen()
        #expect(try library.attributes(of: ids[1]).id == ids[1])
    }

    @Test("a size mismatch between the database and the data is reported")
    func sizeMismatch() throws {
        let (store, ids) = try populatedStore()
        let content = ContentStore(directory: store.location.contentPath)
        #expect(truncate(content.path(of: ids[0]), 3) == 0)
        let problems = try StoreChecker(location: store.location).check(repair: false)
        #expect(problems.count == 1, "\(problems)")
        #expect(problems.first?.description.contains("\(ids[0])") == true)
    }

    @Test("repair gives a size mismatch the data's size (no byte is lost): a second check passes (SEMANTICS.md § Durability and safety)")
    func sizeMismatchRepaired() throws {
        let (store, ids) = try populatedStore()
        do {
            // A row that promises bytes the data does not have, with no mark.
            let db = try Database(path: store.location.databasePath, mode: .readWrite)
            try db.execute("UPDATE nodes SET size = 999999999999999 WHERE id = \(ids[0])")
        }
        let problems = try StoreChecker(location: store.location).check(repair: true)
        #expect(problems.count == 1, "\(problems)")
        #expect(problems.first?.repair != nil, "\(problems)")
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
        let library = try store.reopen()
        try #require(try library.attributes(of: ids[0]).size == 11)
        #expect(try store.read(ids[0]) == bytes("first asset"))
    }

    @Test("what repair leaves is said, with the reason (SEMANTICS.md § Durability and safety)")
    func unrepairedProblemsSayWhy() throws {
        let (store, ids) = try populatedStore()
        #expect(unlink(ContentStore(directory: store.location.contentPath).path(of: ids[1])) == 0)
        let problems = try StoreChecker(location: store.location).check(repair: true)
        #expect(problems.count == 1, "\(problems)")
        #expect(problems.first?.repair == nil)
        #expect(problems.first?.whyNotRepaired?.isEmpty == false, "\(problems)")
    }

    @Test("an asset without a roll entry is reported and repaired into the roll")
    func assetWithoutRollEntry() throws {
        let (store, ids) = try populatedStore()
        do {
            let db = try Database(path: store.location.databasePath, mode: .readWrite)
            try db.execute("DELETE FROM entries WHERE parent = \(roll) AND child = \(ids[1])")
        }
        let problems = try StoreChecker(location: store.location).check(repair: true)
        #expect(problems.count == 1, "\(problems)")
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
        try store.reopen()
        #expect(try store.id(roll, "recovered-\(ids[1])") == ids[1])
    }

    @Test("a check while the store is locked (mounted): unusable store")
    func lockedStore() throws {
        let (store, _) = try populatedStore()
        let lock = try StoreLock(location: store.location)
        expectUnusableStore { _ = try StoreChecker(location: store.location).check(repair: false) }
        withExtendedLifetime(lock) {}
    }

    @Test("a store without a database: unusable store")
    func noDatabase() throws {
        let store = try TestStore(openLibrary: false)
        try store.location.createDirectory()
        expectUnusableStore { _ = try StoreChecker(location: store.location).check(repair: false) }
    }
}
