#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import AlbumCore
import SQLiteKit

private let roll = TestStore.roll

/// A facts reader for the store's tests: a file's content is its facts,
/// `key=value` lines (kind, captured, cid, comment, raw, width, thumb: a
/// thumbnail, a 1 × 1 PNG with the value in a text chunk); its
/// "SHA-256" is its bytes in hex, so identical files share one. The real
/// readers are AlbumMedia's, tested on media made by real tools.
struct LineFactsReader: AssetFactsReader {
    func facts(ofFileAt descriptor: Int32) throws -> AssetFacts {
        let text = String(decoding: try Self.contents(descriptor), as: UTF8.self)
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        return AssetFacts(sha256: try sha256(ofFileAt: descriptor), type: fields["type"],
                          kind: AssetFacts.Kind(rawValue: fields["kind"] ?? "") ?? .other,
                          captured: fields["captured"], width: fields["width"].flatMap { Int($0) },
                          contentIdentifier: fields["cid"], isScreenshot: fields["comment"] == "Screenshot",
                          isRaw: fields["raw"] == "1",
                          thumbnail: fields["thumb"].map { PNGText.adding(["Test": $0], to: PNGText.blank) })
    }

    /// Four FNV-1a hashes of the bytes with different seeds: 64 hex digits,
    /// equal for equal contents (not SHA-256: the real one is AlbumMedia's).
    func sha256(ofFileAt descriptor: Int32) throws -> String {
        let bytes = try Self.contents(descriptor)
        return (0..<4).map { seed -> String in
            var hash: UInt64 = 0xcbf29ce484222325 &+ UInt64(seed)
            for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100000001b3 }
            let hex = String(hash, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }

    private static func contents(_ descriptor: Int32) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = pread(descriptor, &buffer, buffer.count, 0)
        guard count >= 0 else { throw LibraryError.io(errno) }
        return Array(buffer.prefix(count))
    }
}

func indexedStore(trashDays: Int = 30) throws -> TestStore {
    try TestStore(options: LibraryOptions(trashDays: trashDays, factsReader: LineFactsReader()))
}

func settled(_ store: TestStore) {
    #expect(store.library.waitForIndexing(timeout: 10), "the facts were not read within 10 s")
}

private func xattr(_ store: TestStore, _ id: NodeID, _ name: String) -> String? {
    (try? store.library.extendedAttribute(id, Array("user.albumfs.\(name)".utf8))).map { String(decoding: $0, as: UTF8.self) }
}

private func listing(_ store: TestStore, _ directory: NodeID) throws -> [String: NodeID] {
    var names: [String: NodeID] = [:]
    for entry in try store.library.list(directory, after: 0, limit: 10_000) {
        names[String(decoding: entry.name, as: UTF8.self)] = entry.attributes.id
    }
    return names
}

private func lookup(_ store: TestStore, _ parent: NodeID, _ name: String) throws -> NodeID {
    try store.library.lookup(parent, Array(name.utf8)).id
}

/// SEMANTICS.md § What albumfs knows of each asset, and the computed views, on the store alone.
@Suite("Facts and computed views: By Date, Smart Albums, Duplicates, dedupe")
struct ViewsTests {
    @Test("facts are read after the last writer closes; user.albumfs.* show them; a rewrite reads them again")
    func factsAfterClose() throws {
        let store = try indexedStore()
        let id = try store.createFile(roll, "IMG_1.JPG", contents: bytes("kind=photo\ncaptured=2019-07-14T09:30:00+02:00\nwidth=640\ntype=image/jpeg"))
        settled(store)
        #expect(xattr(store, id, "kind") == "photo")
        #expect(xattr(store, id, "captured") == "2019-07-14T09:30:00+02:00")
        #expect(xattr(store, id, "width") == "640")
        #expect(xattr(store, id, "type") == "image/jpeg")
        #expect(xattr(store, id, "sha256")?.count == 64)
        #expect(xattr(store, id, "height") == nil, "a fact the file does not give is absent")
        try store.write(id, bytes("kind=video\ncaptured=2020-01-02T03:04:05Z\n"))
        settled(store)
        #expect(xattr(store, id, "kind") == "video")
        #expect(xattr(store, id, "captured") == "2020-01-02T03:04:05Z")
    }

    @Test("a side file renamed to an ordinary name (rsync's .x.TMP → x, albumfs import) is read as the asset it becomes")
    func sideFileRenamedToAnAssetIsRead() throws {
        let store = try indexedStore()
        for directory in [roll, try store.makeAlbum("Trip")] {
            let id = try store.createFile(directory, ".IMG_2.JPG.tmp", contents: bytes("kind=photo\ntype=image/jpeg"))
            settled(store)
            #expect(xattr(store, id, "sha256") == nil, "a side file is not an asset: it has no facts")
            _ = try store.library.rename(directory, name(".IMG_2.JPG.tmp"), to: directory, name(directory == roll ? "IMG_2.JPG" : "IMG_3.JPG"))
            settled(store)
            #expect(xattr(store, id, "kind") == "photo")
            #expect(xattr(store, id, "sha256")?.count == 64)
        }
    }

    @Test("By Date/YYYY/YYYY-MM holds each live asset by its capture date as written, else its modification month")
    func byDate() throws {
        let store = try indexedStore()
        let dated = try store.createFile(roll, "a.jpg", contents: bytes("kind=photo\ncaptured=2019-07-14T09:30:00+02:00"))
        let undated = try store.createFile(roll, "b.txt", contents: bytes("nothing"))
        settled(store)
        #expect(try listing(store, FixedNode.byDate).keys.sorted() == ["2019", Indexer.localMonth(currentTime()).prefix(4).description].sorted())
        let year = try lookup(store, FixedNode.byDate, "2019")
        let month = try lookup(store, year, "2019-07")
        #expect(try listing(store, year) == ["2019-07": month])
        #expect(try listing(store, month) == ["a.jpg": dated])
        #expect(try lookup(store, month, "a.jpg") == dated, "the same node as the roll's")
        let now = Indexer.localMonth(currentTime())
        let nowMonth = try lookup(store, try lookup(store, FixedNode.byDate, String(now.prefix(4))), now)
        #expect(try listing(store, nowMonth) == ["b.txt": undated])
        #expect(try store.library.attributes(of: dated).linkCount == 1, "views are not links")
        // A deleted asset leaves the view, and an empty month goes with it.
        try store.unlink(roll, "a.jpg")
        #expect(throws: LibraryError.notFound) { try store.library.lookup(FixedNode.byDate, Array("2019".utf8)) }
        #expect(throws: LibraryError.notFound) { try store.library.attributes(of: month) }
    }

    @Test("smart albums hold exactly their assets: Videos, Screenshots (comment or name), RAW, Live Photos pairs")
    func smartAlbums() throws {
        let store = try indexedStore()
        let video = try store.createFile(roll, "clip.mov", contents: bytes("kind=video\ncid=LIVE-1"))
        let still = try store.createFile(roll, "live.heic", contents: bytes("kind=photo\ncid=LIVE-1"))
        let lonely = try store.createFile(roll, "other.heic", contents: bytes("kind=photo\ncid=LIVE-2"))
        let shot = try store.createFile(roll, "IMG_2.PNG", contents: bytes("kind=photo\ncomment=Screenshot"))
        let named = try store.createFile(roll, "Screenshot 2024-01-01.png", contents: bytes("kind=photo\nn=2"))
        let raw = try store.createFile(roll, "DSC.DNG", contents: bytes("kind=photo\nraw=1"))
        let movie = try store.createFile(roll, "movie.mp4", contents: bytes("kind=video\nmovie"))
        _ = try store.createFile(roll, "notes.txt", contents: bytes("text"))
        settled(store)
        // A Live Photo shows once, by its still: its video is in neither
        // Videos nor Live Photos (SEMANTICS.md § Pairs).
        #expect(try listing(store, FixedNode.videos) == ["movie.mp4": movie])
        #expect(try listing(store, FixedNode.livePhotos) == ["live.heic": still])
        #expect(try store.assetIdentifier(still) == String(video), "paired: one identifier, the older file's")
        #expect(try listing(store, FixedNode.screenshots) == ["IMG_2.PNG": shot, "Screenshot 2024-01-01.png": named])
        #expect(try listing(store, FixedNode.raw) == ["DSC.DNG": raw])
        #expect(try listing(store, FixedNode.livePhotos)["other.heic"] == nil)
        _ = lonely
        #expect(try listing(store, FixedNode.smartAlbums).keys.sorted() == ["Duplicates", "Edited", "Favorites", "Live Photos", "Originals", "RAW", "Screenshots", "Videos"])
    }

    @Test("Favorites: ln sets the flag, rm clears it; everything else in views is EPERM")
    func favoritesAndRefusals() throws {
        let store = try indexedStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(a, "x.jpg", contents: bytes("kind=photo"))
        settled(store)
        _ = try store.library.link(id, into: FixedNode.favorites, named: Array("x.jpg".utf8))
        #expect(xattr(store, id, "favorite") == "1")
        #expect(try listing(store, FixedNode.favorites) == ["x.jpg": id])
        #expect(try store.library.attributes(of: id).linkCount == 2, "roll + A: Favorites is not a link")
        _ = try store.library.unlink(FixedNode.favorites, Array("x.jpg".utf8))
        #expect(xattr(store, id, "favorite") == nil)
        #expect(try listing(store, FixedNode.favorites).isEmpty)
        #expect(try store.id(roll, "x.jpg") == id, "rm in Favorites deletes nothing")

        #expect(throws: LibraryError.notPermitted) { try store.createFile(FixedNode.videos, "new") }
        #expect(throws: LibraryError.notPermitted) { try store.library.link(id, into: FixedNode.videos, named: Array("x.jpg".utf8)) }
        #expect(throws: LibraryError.notPermitted) { try store.makeAlbum(FixedNode.byDate, "mine") }
        let now = Indexer.localMonth(currentTime())
        let month = try lookup(store, try lookup(store, FixedNode.byDate, String(now.prefix(4))), now)
        #expect(throws: LibraryError.notPermitted) { try store.library.unlink(month, Array("x.jpg".utf8)) }
        #expect(throws: LibraryError.notPermitted) { try store.createFile(month, "new") }
        #expect(throws: LibraryError.notPermitted) { try store.rename(month, "x.jpg", to: roll, "y.jpg") }
        #expect(throws: LibraryError.notPermitted) { try store.rename(roll, "x.jpg", to: FixedNode.videos, "x.jpg") }
        #expect(throws: LibraryError.notPermitted) { try store.library.removeAlbum(FixedNode.smartAlbums, Array("Videos".utf8)) }
        #expect(try store.id(roll, "x.jpg") == id)
    }

    @Test("identical assets form one Duplicates set; dedupe keeps the first in every album, the other to Recently Deleted")
    func duplicatesAndDedupe() throws {
        let store = try indexedStore()
        let a = try store.makeAlbum("A"), b = try store.makeAlbum("B")
        let first = try store.createFile(a, "one.jpg", contents: bytes("kind=photo\nsame"))
        let second = try store.createFile(b, "two.jpg", contents: bytes("kind=photo\nsame"))
        _ = try store.createFile(roll, "three.jpg", contents: bytes("kind=photo\ndifferent"))
        settled(store)
        let sets = try listing(store, FixedNode.duplicates)
        #expect(sets.count == 1)
        let set = try #require(sets.values.first)
        #expect(try listing(store, set) == ["one.jpg": first, "two.jpg": second])

        let dry = try store.library.dedupe(dryRun: true, hashing: LineFactsReader())
        #expect(dry.count == 1 && dry[0].kept == first && dry[0].merged.map(\.id) == [second])
        #expect(try store.id(roll, "two.jpg") == second, "a dry run changes nothing")

        let done = try store.library.dedupe(dryRun: false, hashing: LineFactsReader())
        #expect(done.count == 1)
        #expect(try store.id(a, "one.jpg") == first)
        #expect(try store.id(b, "two.jpg") == first, "the kept asset joins B under the member's album name")
        #expect(try store.id(roll, "two.jpg") == nil)
        #expect(try store.id(FixedNode.recentlyDeleted, "two.jpg") == second)
        #expect(try listing(store, FixedNode.duplicates).isEmpty)
        #expect(try store.library.attributes(of: first).linkCount == 3)
        store.close()
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
    }

    @Test("dedupe merges only what it has just proven identical: an edit the facts do not know yet is never merged away")
    func dedupeRehashesBeforeMerging() throws {
        // SEMANTICS.md § the computed views (Duplicates, dedupe).
        let store = try indexedStore(trashDays: 0)
        let first = try store.createFile(roll, "one.jpg", contents: bytes("kind=photo\nsame"))
        let second = try store.createFile(roll, "two.jpg", contents: bytes("kind=photo\nsame"))
        settled(store)
        // No indexer from here: the facts stay those of before the edit.
        let library = try store.reopen(options: LibraryOptions(trashDays: 0))
        try store.write(second, bytes("kind=photo\nedited"))
        #expect(try library.dedupe(dryRun: true, hashing: LineFactsReader()).isEmpty)
        #expect(try library.dedupe(dryRun: false, hashing: LineFactsReader()).isEmpty)
        #expect(try store.id(roll, "two.jpg") == second, "the edited photo was merged away (and purged: trash_days=0)")
        #expect(try store.read(second) == bytes("kind=photo\nedited"))
        #expect(try store.id(roll, "one.jpg") == first)
    }

    @Test("dedupe leaves out a member open for writing, even while its data still matches")
    func dedupeSkipsWhatIsBeingWritten() throws {
        let store = try indexedStore()
        _ = try store.createFile(roll, "one.jpg", contents: bytes("kind=photo\nsame"))
        let second = try store.createFile(roll, "two.jpg", contents: bytes("kind=photo\nsame"))
        settled(store)
        let file = try store.library.open(second, writable: true, truncate: false)
        #expect(try store.library.dedupe(dryRun: false, hashing: LineFactsReader()).isEmpty)
        #expect(try store.id(roll, "two.jpg") == second)
        try store.library.release(file)
        settled(store)
        #expect(try store.library.dedupe(dryRun: false, hashing: LineFactsReader()).count == 1, "closed again: merged")
    }

    @Test("fsck --verify names an asset whose content no longer matches its SHA-256, and changes nothing")
    func verify() throws {
        let store = try indexedStore()
        let id = try store.createFile(roll, "x.jpg", contents: bytes("kind=photo\nbytes"))
        _ = try store.createFile(roll, "y.jpg", contents: bytes("kind=photo\nother"))
        settled(store)
        store.close()
        let verifier = ContentVerifier(location: store.location, reader: LineFactsReader())
        #expect(try verifier.verify().isEmpty)
        let path = ContentStore(directory: store.location.contentPath).path(of: id)
        let descriptor = open(path, O_WRONLY)
        #expect(descriptor >= 0)
        #expect(pwrite(descriptor, "K", 1, 0) == 1)
        close(descriptor)
        let found = try verifier.verify()
        #expect(found.map(\.asset) == [id])
        #expect(found.first?.name == "x.jpg")
    }

    @Test("an asset with no facts at mount is read then; the views' directories come with the migration")
    func indexMissingAtMount() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x.mov", contents: bytes("kind=video"))
        #expect(try store.library.extendedAttributeNames(id).isEmpty)
        #expect(xattr(store, id, "kind") == nil)
        try store.reopen(options: LibraryOptions(factsReader: LineFactsReader()))
        settled(store)
        #expect(xattr(store, id, "kind") == "video")
        #expect(try listing(store, FixedNode.videos) == ["x.mov": id])
        #expect(try store.sortedNames(TestStore.root) == ["Albums", "By Date", "Camera Roll", "Hidden", "Recently Deleted", "Smart Albums"])
    }

    @Test("a view registered after a store was made gets its directory at the next open, owned like the root")
    func viewDirectoryAddedAtOpen() throws {
        let store = try TestStore()
        store.close()
        // A store from before the view: its directory and entry are not there.
        do {
            let db = try Database(path: store.location.databasePath, mode: .readWrite)
            try db.execute("PRAGMA foreign_keys = ON")
            try db.execute("DELETE FROM entries WHERE child = \(FixedNode.raw)")
            try db.execute("DELETE FROM nodes WHERE id = \(FixedNode.raw)")
        }
        let library = try store.reopen()
        #expect(try store.sortedNames(FixedNode.smartAlbums).contains("RAW"))
        let raw = try library.lookup(FixedNode.smartAlbums, name("RAW"))
        let root = try library.attributes(of: TestStore.root)
        #expect(raw.id == FixedNode.raw && raw.uid == root.uid && raw.gid == root.gid)
        #expect(ComputedViews.view(serving: FixedNode.raw) != nil)
    }
}
