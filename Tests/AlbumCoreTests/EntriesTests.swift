import Dispatch
import Synchronization
import Testing
@testable import AlbumCore

private let roll = TestStore.roll
private let albums = TestStore.albums
private let root = TestStore.root

/// Assets stored, as statfs reports them (f_files − f_ffree).
func assetCount(_ store: TestStore) throws -> UInt64 {
    let statistics = try store.library.statistics()
    return statistics.files - statistics.freeFiles
}

@Suite("Entries: create, link, unlink, mkdir, rmdir")
struct EntriesTests {
    @Test("a new store shows the fixed directories")
    func fixedLayout() throws {
        let store = try TestStore()
        #expect(try store.sortedNames(root) == ["Albums", "By Date", "Camera Roll", "Hidden", "Recently Deleted", "Smart Albums"])
        #expect(try store.id(root, "Camera Roll") == roll)
        #expect(try store.id(root, "Albums") == albums)
        #expect(try store.names(roll).isEmpty)
        #expect(try store.names(albums).isEmpty)
        #expect(try store.library.parent(ofDirectory: roll) == root)
        #expect(try store.library.parent(ofDirectory: root) == root)
    }

    @Test("create in the roll: a new asset with one roll entry")
    func createInRoll() throws {
        let store = try TestStore()
        let (a, _) = try store.library.createAsset(in: roll, named: name("IMG_1.JPG"), mode: 0o640, by: Caller(uid: 7, gid: 8))
        #expect(a.kind == .asset)
        #expect(a.size == 0)
        #expect(a.mode == 0o640)
        #expect(a.uid == 7 && a.gid == 8)
        #expect(a.linkCount == 1)
        #expect(a.id > FixedNode.lastReservedID)
        #expect(try store.id(roll, "IMG_1.JPG") == a.id)
        #expect(try store.names(roll) == [name("IMG_1.JPG")])
        #expect(store.dataSize(of: a.id) == 0)
    }

    @Test("create in an album: roll entry and album entry of one asset")
    func createInAlbum() throws {
        let store = try TestStore()
        let trip = try store.makeAlbum("Trip")
        let (a, changes) = try store.library.createAsset(in: trip, named: name("IMG_1.JPG"), mode: 0o644, by: TestStore.owner)
        #expect(try store.id(trip, "IMG_1.JPG") == a.id)
        #expect(try store.id(roll, "IMG_1.JPG") == a.id)
        #expect(try store.library.lookup(roll, name("IMG_1.JPG")).linkCount == 2)
        #expect(try store.library.lookup(trip, name("IMG_1.JPG")).linkCount == 2)
        #expect(try store.library.attributes(of: a.id).linkCount == 2)
        // The roll's cached listing must go (it gained an entry through the
        // album); the new name needs no name invalidation (it was free).
        #expect(changes.directories.contains(roll))
        #expect(changes.entries.isEmpty)
    }

    @Test("two different files of one name in two albums: the roll numbers the second")
    func sameNameInTwoAlbums() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        let first = try store.createFile(a, "IMG_1.JPG", contents: bytes("first"))
        let second = try store.createFile(b, "IMG_1.JPG", contents: bytes("second"))
        #expect(first != second)
        #expect(try store.sortedNames(roll) == ["IMG_1 (2).JPG", "IMG_1.JPG"])
        #expect(try store.id(roll, "IMG_1.JPG") == first)
        #expect(try store.id(roll, "IMG_1 (2).JPG") == second)
        #expect(try store.read(first) == bytes("first"))
        #expect(try store.read(second) == bytes("second"))
        // A third takes (3).
        let c = try store.makeAlbum("C")
        let third = try store.createFile(c, "IMG_1.JPG")
        #expect(try store.id(roll, "IMG_1 (3).JPG") == third)
    }

    @Test("create onto an existing name in the same directory: exists")
    func createExisting() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        try store.createFile(roll, "x")
        try store.createFile(a, "y")
        #expect(throws: LibraryError.exists) { try store.createFile(roll, "x") }
        #expect(throws: LibraryError.exists) { try store.createFile(a, "y") }
        #expect(try store.names(roll).count == 2)
    }

    @Test("create in the root or in Albums/: not permitted; mkdir in the roll or the root: not permitted")
    func createInFixedPlaces() throws {
        let store = try TestStore()
        #expect(throws: LibraryError.notPermitted) { try store.createFile(root, "x") }
        #expect(throws: LibraryError.notPermitted) { try store.createFile(albums, "x.jpg") }
        #expect(throws: LibraryError.notPermitted) { try store.makeAlbum(roll, "A") }
        #expect(throws: LibraryError.notPermitted) { try store.makeAlbum(root, "A") }
        #expect(try store.names(roll).isEmpty)
        #expect(try store.names(albums).isEmpty)
        #expect(try store.sortedNames(root) == ["Albums", "By Date", "Camera Roll", "Hidden", "Recently Deleted", "Smart Albums"])
    }

    @Test("create with an invalid or too long name fails before anything changes")
    func createBadNames() throws {
        let store = try TestStore()
        #expect(throws: LibraryError.nameTooLong) {
            try store.createFile(roll, [UInt8](repeating: 0x61, count: 256))
        }
        #expect(throws: LibraryError.invalidArgument) { try store.createFile(roll, "a/b") }
        #expect(throws: LibraryError.nameTooLong) {
            try store.library.lookup(roll, [UInt8](repeating: 0x61, count: 256))
        }
        #expect(try store.names(roll).isEmpty)
    }

    @Test("create in a directory that does not exist: not found")
    func createInMissingDirectory() throws {
        let store = try TestStore()
        #expect(throws: LibraryError.notFound) { try store.createFile(999_999, "x") }
        #expect(throws: LibraryError.notFound) { try store.makeAlbum(999_999, "A") }
    }

    @Test("link adds the asset to an album without copying; twice: exists")
    func linkIntoAlbum() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(roll, "x.jpg", contents: bytes("data"))
        let (linked, _) = try store.library.link(id, into: a, named: name("y.jpg"))
        #expect(linked.id == id)
        #expect(linked.linkCount == 2)
        #expect(try store.id(a, "y.jpg") == id)
        #expect(try store.read(id) == bytes("data"))
        #expect(try store.names(roll) == [name("x.jpg")])  // no new roll entry, no copy
        #expect(try assetCount(store) == 1)
        // Again, under the same or any other name.
        #expect(throws: LibraryError.exists) { try store.library.link(id, into: a, named: name("y.jpg")) }
        #expect(throws: LibraryError.exists) { try store.library.link(id, into: a, named: name("z.jpg")) }
        #expect(try store.names(a) == [name("y.jpg")])
    }

    @Test("link onto a name taken by another asset: exists")
    func linkOntoTakenName() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let one = try store.createFile(a, "x")
        let two = try store.createFile(roll, "y")
        #expect(throws: LibraryError.exists) { try store.library.link(two, into: a, named: name("x")) }
        #expect(try store.id(a, "x") == one)
    }

    @Test("link into the roll: exists; into the root or Albums/: not permitted; an album: not permitted")
    func linkIntoFixed() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(roll, "x")
        #expect(throws: LibraryError.exists) { try store.library.link(id, into: roll, named: name("x2")) }
        #expect(throws: LibraryError.notPermitted) { try store.library.link(id, into: albums, named: name("x")) }
        #expect(throws: LibraryError.notPermitted) { try store.library.link(id, into: root, named: name("x")) }
        #expect(throws: LibraryError.notPermitted) { try store.library.link(a, into: a, named: name("self")) }
        #expect(try store.names(roll) == [name("x")])
        #expect(try store.library.attributes(of: id).linkCount == 1)
    }

    @Test("unlink in an album removes only that reference")
    func unlinkInAlbum() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        let id = try store.createFile(a, "x", contents: bytes("keep me"))
        _ = try store.library.link(id, into: b, named: name("bx"))
        #expect(try store.library.attributes(of: id).linkCount == 3)

        _ = try store.library.unlink(a, name("x"))
        #expect(try store.id(a, "x") == nil)
        #expect(try store.id(b, "bx") == id)
        #expect(try store.id(roll, "x") == id)
        #expect(try store.library.attributes(of: id).linkCount == 2)
        #expect(try store.read(id) == bytes("keep me"))
        #expect(store.dataSize(of: id) == 7)
    }

    @Test("trash_days=0: unlink in the roll removes the asset from every album and frees its data")
    func unlinkInRoll() throws {
        let store = try TestStore(options: .purgeAtOnce)
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        let id = try store.createFile(a, "x", contents: bytes("bye"))
        _ = try store.library.link(id, into: b, named: name("bx"))
        let other = try store.createFile(b, "other")

        let changes = try store.library.unlink(roll, name("x"))
        #expect(try store.id(roll, "x") == nil)
        #expect(try store.id(a, "x") == nil)
        #expect(try store.id(b, "bx") == nil)
        #expect(!store.exists(id))
        #expect(store.dataSize(of: id) == nil)
        #expect(changes.entries.contains(ChangeSet.EntryName(directory: a, name: name("x"))))
        #expect(changes.entries.contains(ChangeSet.EntryName(directory: b, name: name("bx"))))
        // Nothing else went.
        #expect(try store.id(b, "other") == other)
        #expect(store.dataSize(of: other) == 0)
        #expect(try assetCount(store) == 1)
    }

    @Test("unlink of a missing name, of an album, in the root: errors, nothing changes")
    func unlinkErrors() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        #expect(throws: LibraryError.notFound) { try store.library.unlink(roll, name("nope")) }
        #expect(throws: LibraryError.isDirectory) { try store.library.unlink(albums, name("A")) }
        #expect(throws: LibraryError.isDirectory) { try store.library.unlink(root, name("Camera Roll")) }
        #expect(try store.id(albums, "A") == a)
    }

    @Test("mkdir makes nested albums; the same name twice: exists")
    func makeAlbums() throws {
        let store = try TestStore()
        let trips = try store.makeAlbum("Trips", mode: 0o750)
        let y2024 = try store.makeAlbum(trips, "2024")
        let paris = try store.makeAlbum(y2024, "Paris")
        #expect(try store.id(albums, "Trips") == trips)
        #expect(try store.id(trips, "2024") == y2024)
        #expect(try store.id(y2024, "Paris") == paris)
        #expect(try store.library.parent(ofDirectory: paris) == y2024)
        #expect(try store.library.parent(ofDirectory: trips) == albums)
        let attributes = try store.library.attributes(of: trips)
        #expect(attributes.kind == .album)
        #expect(attributes.mode == 0o750)
        #expect(attributes.linkCount == 3)  // 2 + one sub-album
        #expect(throws: LibraryError.exists) { try store.makeAlbum("Trips") }
        #expect(throws: LibraryError.exists) { try store.makeAlbum(trips, "2024") }
        // A file's name is taken too.
        try store.createFile(trips, "f")
        #expect(throws: LibraryError.exists) { try store.makeAlbum(trips, "f") }
    }

    @Test("rmdir removes an empty album only")
    func removeAlbums() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let sub = try store.makeAlbum(a, "Sub")
        #expect(throws: LibraryError.notEmpty) { try store.library.removeAlbum(albums, name("A")) }
        _ = try store.library.removeAlbum(a, name("Sub"))
        #expect(!store.exists(sub))
        let file = try store.createFile(a, "x")
        #expect(throws: LibraryError.notEmpty) { try store.library.removeAlbum(albums, name("A")) }
        _ = try store.library.unlink(a, name("x"))
        _ = try store.library.removeAlbum(albums, name("A"))
        #expect(try store.id(albums, "A") == nil)
        #expect(!store.exists(a))
        // The asset stays.
        #expect(try store.id(roll, "x") == file)
    }

    @Test("rmdir of a fixed directory: not permitted; of a file: not a directory; missing: not found")
    func removeAlbumErrors() throws {
        let store = try TestStore()
        try store.createFile(roll, "x")
        #expect(throws: LibraryError.notPermitted) { try store.library.removeAlbum(root, name("Albums")) }
        #expect(throws: LibraryError.notPermitted) { try store.library.removeAlbum(root, name("Camera Roll")) }
        #expect(throws: LibraryError.notDirectory) { try store.library.removeAlbum(roll, name("x")) }
        #expect(throws: LibraryError.notFound) { try store.library.removeAlbum(albums, name("nope")) }
        #expect(try store.sortedNames(root) == ["Albums", "By Date", "Camera Roll", "Hidden", "Recently Deleted", "Smart Albums"])
    }

    @Test("a listing resumes after its cookie")
    func listingCookies() throws {
        let store = try TestStore()
        for i in 0..<10 { try store.createFile(roll, "f\(i)") }
        var seen: [Name] = []
        var cookie: Int64 = 0
        while true {
            let page = try store.library.list(roll, after: cookie, limit: 3)
            if page.isEmpty { break }
            #expect(page.count <= 3)
            seen += page.map(\.name)
            cookie = page.last!.cookie
        }
        #expect(seen == (0..<10).map { name("f\($0)") })
        #expect(throws: LibraryError.notDirectory) {
            try store.library.list(try store.id(roll, "f0")!, after: 0, limit: 10)
        }
    }

    @Test("names are stored byte for byte: no normalisation, no case folding")
    func namesByteForByte() throws {
        let store = try TestStore()
        let composed = name("\u{E9}.jpg")          // é as one code point
        let decomposed = name("e\u{301}.jpg")      // e + combining acute
        let one = try store.createFile(roll, composed)
        let two = try store.createFile(roll, decomposed)
        let three = try store.createFile(roll, "E.JPG")
        let four = try store.createFile(roll, "e.jpg")
        let five = try store.createFile(roll, [0xff, 0xfe])
        #expect(Set([one, two, three, four, five]).count == 5)
        #expect(try store.id(roll, composed) == one)
        #expect(try store.id(roll, decomposed) == two)
        #expect(try store.id(roll, [0xff, 0xfe]) == five)
        #expect(Set(try store.names(roll)) == Set([composed, decomposed, name("E.JPG"), name("e.jpg"), [0xff, 0xfe]]))
    }

    @Test("a roll entry numbered for a clash stays within 255 bytes when the extension is long")
    func numberedRollNameWithinLimit() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let long = name("a." + String(repeating: "b", count: 251))  // 253 bytes: a valid name
        try store.createFile(roll, long)
        let id = try store.createFile(a, long)
        let rollNames = try store.names(roll)
        #expect(rollNames.count == 2)
        for entry in rollNames {
            #expect(entry.count <= Names.maxLength, "a roll entry of \(entry.count) bytes")
        }
        // The new asset's roll entry can be looked up by its name.
        let rollName = try store.library.list(roll, after: 0, limit: 10).first { $0.attributes.id == id }?.name
        if let rollName {
            #expect(try store.library.lookup(roll, rollName).id == id)
        } else {
            Issue.record("the new asset has no roll entry")
        }
    }

    @Test("creating a file or an album changes the directory's mtime and ctime")
    func directoryTimes() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        for id in [a, roll, albums] {
            _ = try store.library.setAttributes(id, AttributeChanges(modificationTime: .set(1)))
        }
        let start = currentTime()
        try store.createFile(a, "x")
        try store.makeAlbum("B")
        for id in [a, roll, albums] {
            let attributes = try store.library.attributes(of: id)
            #expect(attributes.modificationTime >= start)
            #expect(attributes.changeTime >= start)
        }
    }

    @Test("two creators of one album name at once: exactly one wins")
    func mkdirRace() throws {
        let store = try TestStore()
        let library = store.library
        for round in 0..<20 {
            let outcomes = Mutex<[Result<NodeID, LibraryError>]>([])
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                let outcome: Result<NodeID, LibraryError>
                do {
                    outcome = .success(try library.makeAlbum(in: albums, named: name("R\(round)"), mode: 0o755, by: TestStore.owner).id)
                } catch {
                    outcome = .failure(error as? LibraryError ?? .io(-1))
                }
                outcomes.withLock { $0.append(outcome) }
            }
            let results = outcomes.withLock { $0 }
            let winners = results.compactMap { try? $0.get() }
            #expect(winners.count == 1)
            #expect(results.filter { if case .failure(.exists) = $0 { true } else { false } }.count == 3)
            #expect(try store.id(albums, "R\(round)") == winners.first)
        }
    }

    @Test("concurrent creates of one name in different albums get distinct roll names")
    func concurrentCreatesInAlbums() throws {
        let store = try TestStore()
        let library = store.library
        let albumIDs = try (0..<8).map { try store.makeAlbum("A\($0)") }
        let ids = Mutex<[NodeID]>([])
        let failures = Mutex<[LibraryError]>([])
        DispatchQueue.concurrentPerform(iterations: albumIDs.count) { i in
            do {
                let (attributes, _) = try library.createAsset(in: albumIDs[i], named: name("IMG.JPG"), mode: 0o644, by: TestStore.owner)
                ids.withLock { $0.append(attributes.id) }
            } catch {
                failures.withLock { $0.append(error as? LibraryError ?? .io(-1)) }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty)
        #expect(Set(ids.withLock { $0 }).count == 8)
        let expected = ["IMG.JPG"] + (2...8).map { "IMG (\($0)).JPG" }
        #expect(try store.sortedNames(roll) == expected.sorted())
    }
}
