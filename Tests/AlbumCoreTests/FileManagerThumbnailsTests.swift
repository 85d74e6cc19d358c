#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import AlbumCore
import Digests

/// SEMANTICS.md § Thumbnails: what a listing puts in the freedesktop
/// thumbnail cache, without FUSE (the mounted test, with GIO and Nautilus, is
/// test_thumbnails.py).
@Suite("Thumbnails where file managers look: the freedesktop cache, one per path")
struct FileManagerThumbnailsTests {
    let mountPoint = "/media/u/Photos"

    /// A thumbnail cache in the store's temporary directory, removed with it.
    func cache(of store: TestStore) -> String {
        store.directory + "/thumbnails"
    }

    func file(_ cache: String, _ dir: String, _ uri: String) -> String {
        cache + "/" + dir + "/" + MD5.hex(Array(uri.utf8)) + ".png"
    }

    func text(_ path: String) -> [String: String] {
        guard let data = FileManager.default.contents(atPath: path) else { return [:] }
        return PNGText.chunks(in: Array(data)[...])
    }

    func inode(_ path: String) -> ino_t? {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_ino : nil
    }

    @Test("URIs are escaped as GLib's g_filename_to_uri escapes them (UNSAFE_PATH)")
    func uris() {
        #expect(FileManagerThumbnails.uri(Array("/m/Camera Roll/IMG_0001.JPG".utf8)) == "file:///m/Camera%20Roll/IMG_0001.JPG")
        #expect(FileManagerThumbnails.uri(Array("/m/a#b?c%d;e[f]g{h}i^j`k|l\\m\"n<o>.jpg".utf8))
                == "file:///m/a%23b%3Fc%25d%3Be%5Bf%5Dg%7Bh%7Di%5Ej%60k%7Cl%5Cm%22n%3Co%3E.jpg")
        #expect(FileManagerThumbnails.uri(Array("/m/!$&'()*+,-.:=@_~.jpg".utf8)) == "file:///m/!$&'()*+,-.:=@_~.jpg")
        #expect(FileManagerThumbnails.uri(Array("/m/café\t.jpg".utf8)) == "file:///m/caf%C3%A9%09.jpg")
        // A name that is not UTF-8 is escaped byte by byte.
        #expect(FileManagerThumbnails.uri([0x2F, 0xFF, 0x41]) == "file:///%FFA")
    }

    @Test("a listing writes a photo's thumbnail for the path it is listed under, with Thumb::URI and Thumb::MTime; each path its own")
    func publishes() throws {
        let store = try indexedStore()
        let cache = cache(of: store)
        let photo = try store.createFile(TestStore.roll, "IMG 1.jpg", contents: Array("kind=photo\nthumb=one".utf8))
        let album = try store.makeAlbum(TestStore.albums, "Trip")
        _ = try store.library.link(photo, into: album, named: Array("IMG 1.jpg".utf8))
        settled(store)
        let seconds = try store.library.attributes(of: photo).modificationTime / 1_000_000_000
        let thumbnails = FileManagerThumbnails(library: store.library, mountPoint: mountPoint, cache: cache)

        thumbnails.publish(TestStore.roll, try store.library.list(TestStore.roll, after: 0, limit: 100))
        let rollURI = "file:///media/u/Photos/Camera%20Roll/IMG%201.jpg"
        let written = text(file(cache, "large", rollURI))
        #expect(written["Thumb::URI"] == rollURI && written["Thumb::MTime"] == String(seconds) && written["Test"] == "one")
        // The album's path is not written before the album is listed; then it is.
        let albumURI = "file:///media/u/Photos/Albums/Trip/IMG%201.jpg"
        #expect(inode(file(cache, "large", albumURI)) == nil)
        thumbnails.publish(album, try store.library.list(album, after: 0, limit: 100))
        #expect(text(file(cache, "large", albumURI))["Thumb::URI"] == albumURI)
        #expect(inode(file(cache, "large", albumURI)).map { _ in true } == true)
        var mode = stat()
        stat(file(cache, "large", albumURI), &mode)
        #expect(mode.st_mode & 0o777 == 0o600)
    }

    @Test("a thumbnail is written once: not again at the next listing, nor at the next mount that finds it on disk; again once the mtime changes")
    func writtenOnce() throws {
        let (store, cache, photo) = try oneFile("a.jpg", "kind=photo\nthumb=a")
        let uri = "file:///media/u/Photos/Camera%20Roll/a.jpg"
        try publishRoll(store, cache)
        let first = try #require(inode(file(cache, "large", uri)))
        let again = FileManagerThumbnails(library: store.library, mountPoint: mountPoint, cache: cache)
        again.publish(TestStore.roll, try store.library.list(TestStore.roll, after: 0, limit: 100))
        again.publish(TestStore.roll, try store.library.list(TestStore.roll, after: 0, limit: 100))
        #expect(inode(file(cache, "large", uri)) == first, "rewritten although it was there as it must be")
        // Touched: its mtime is not the thumbnail's any more.
        let later = try store.library.attributes(of: photo).modificationTime + 5_000_000_000
        _ = try store.library.setAttributes(photo, AttributeChanges(modificationTime: .set(later)), by: TestStore.owner)
        again.publish(TestStore.roll, try store.library.list(TestStore.roll, after: 0, limit: 100))
        let seconds = try store.library.attributes(of: photo).modificationTime / 1_000_000_000
        #expect(text(file(cache, "large", uri))["Thumb::MTime"] == String(seconds))
    }

    @Test("no thumbnail: nothing while the data is local (the file manager draws its own); a failed marker when it is only in the bucket")
    func withoutThumbnail() throws {
        let (store, cache, _) = try oneFile("clip.mov", "kind=video")
        let thumbnails = FileManagerThumbnails(library: store.library, mountPoint: mountPoint, cache: cache)
        let entries = try store.library.list(TestStore.roll, after: 0, limit: 100)
        thumbnails.publish(TestStore.roll, entries)
        let uri = "file:///media/u/Photos/Camera%20Roll/clip.mov"
        #expect(inode(file(cache, "large", uri)) == nil && inode(file(cache, "fail/gnome-thumbnail-factory", uri)) == nil)
        // Evicted (as the listing of a remote-only original says).
        let remoteOnly = entries.map { e -> DirectoryEntry in
            var attributes = e.attributes
            attributes.isRemoteOnly = true
            return DirectoryEntry(name: e.name, attributes: attributes, cookie: e.cookie)
        }
        thumbnails.publish(TestStore.roll, remoteOnly)
        let marker = text(file(cache, "fail/gnome-thumbnail-factory", uri))
        #expect(marker["Thumb::URI"] == uri && marker["Thumb::MTime"] != nil)
        #expect(inode(file(cache, "large", uri)) == nil)
    }

    @Test("a cache that cannot be written is said once, and the listing goes on")
    func unwritable() throws {
        let lines = Lines()
        var options = LibraryOptions(trashDays: 30, factsReader: LineFactsReader())
        options.log = { lines.append($0) }
        let store = try TestStore(options: options)
        _ = try store.createFile(TestStore.roll, "a.jpg", contents: Array("kind=photo\nthumb=a".utf8))
        _ = try store.createFile(TestStore.roll, "b.jpg", contents: Array("kind=photo\nthumb=b".utf8))
        settled(store)
        let blocker = NSTemporaryDirectory() + "albumfs-thumbblock-\(getpid())"
        _ = FileManager.default.createFile(atPath: blocker, contents: Data())
        defer { unlink(blocker) }
        // Room for one: what failed to be written does not use it up.
        var limits = FileManagerThumbnails.Limits()
        limits.space = 4096
        let thumbnails = FileManagerThumbnails(library: store.library, mountPoint: mountPoint,
                                               cache: blocker + "/thumbnails", limits: limits)
        thumbnails.publish(TestStore.roll, try store.library.list(TestStore.roll, after: 0, limit: 100))
        thumbnails.publish(TestStore.roll, try store.library.list(TestStore.roll, after: 0, limit: 100))
        #expect(lines.all.filter { $0.contains("thumbnails: cannot write") }.count == 1, "\(lines.all)")
        #expect(!lines.all.contains { $0.contains("thumbnail_space") }, "\(lines.all)")
    }

    /// A store with a log, `count` photos with thumbnails in the roll, and its roll's listing.
    func photos(_ count: Int, lines: Lines) throws -> (TestStore, [DirectoryEntry]) {
        var options = LibraryOptions(trashDays: 30, factsReader: LineFactsReader())
        options.log = { lines.append($0) }
        let store = try TestStore(options: options)
        for i in 0..<count {
            _ = try store.createFile(TestStore.roll, "p\(i).jpg", contents: Array("kind=photo\nthumb=\(i)".utf8))
        }
        settled(store)
        return (store, try store.library.list(TestStore.roll, after: 0, limit: 100))
    }

    /// An indexed store with one file in the roll (its lines of facts), settled; its cache.
    func oneFile(_ fileName: String, _ facts: String) throws -> (TestStore, String, NodeID) {
        let store = try indexedStore()
        let id = try store.createFile(TestStore.roll, fileName, contents: Array(facts.utf8))
        settled(store)
        return (store, cache(of: store), id)
    }

    /// A listing of the roll by a new mount's thumbnails.
    func publishRoll(_ store: TestStore, _ cache: String) throws {
        FileManagerThumbnails(library: store.library, mountPoint: mountPoint, cache: cache)
            .publish(TestStore.roll, try store.library.list(TestStore.roll, after: 0, limit: 100))
    }

    func written(_ cache: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: cache + "/large")) ?? []).filter { !$0.hasPrefix(".") }
    }

    @Test("a thumbnail file's own mtime is when it was written, not its photo's (GNOME's housekeeping deletes by that age, 180 days)")
    func mtimeIsWhenWritten() throws {
        let (store, cache, photo) = try oneFile("old.jpg", "kind=photo\nthumb=old")
        let taken: Int64 = 1_420_070_400  // 2015-01-01
        _ = try store.library.setAttributes(photo, AttributeChanges(modificationTime: .set(taken * 1_000_000_000)), by: TestStore.owner)
        try publishRoll(store, cache)
        let path = file(cache, "large", "file:///media/u/Photos/Camera%20Roll/old.jpg")
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(abs(Int64(info.st_mtim.tv_sec) - Int64(time(nil))) < 3600, "mtime \(info.st_mtim.tv_sec)")
        #expect(text(path)["Thumb::MTime"] == String(taken))
        // Found as it must be at the next mount: not written again.
        let first = inode(path)
        try publishRoll(store, cache)
        #expect(inode(path) == first)
    }

    @Test("a valid thumbnail the file manager made itself (no albumfs attribute) is kept, not written over")
    func keepsTheFileManagersOwn() throws {
        let (store, cache, photo) = try oneFile("own.jpg", "kind=photo\nthumb=own")
        // Taken in 2015: the file manager's thumbnail, written now, has a file mtime of now (as GNOME's do).
        let seconds: Int64 = 1_420_070_400
        _ = try store.library.setAttributes(photo, AttributeChanges(modificationTime: .set(seconds * 1_000_000_000)), by: TestStore.owner)
        let entries = try store.library.list(TestStore.roll, after: 0, limit: 100)
        let uri = "file:///media/u/Photos/Camera%20Roll/own.jpg"
        let path = file(cache, "large", uri)
        try FileManager.default.createDirectory(atPath: cache + "/large", withIntermediateDirectories: true)
        let own = PNGText.adding(["Thumb::URI": uri, "Thumb::MTime": String(seconds), "Software": "GNOME"], to: PNGText.blank)
        _ = FileManager.default.createFile(atPath: path, contents: Data(own))
        FileManagerThumbnails(library: store.library, mountPoint: mountPoint, cache: cache).publish(TestStore.roll, entries)
        #expect(text(path)["Software"] == "GNOME")
    }

    @Test("a mount writes at most `space` bytes of thumbnails (whole blocks each), then none, said once")
    func spaceBound() throws {
        let lines = Lines()
        let (store, entries) = try photos(3, lines: lines)
        let cache = cache(of: store)
        var limits = FileManagerThumbnails.Limits()
        limits.space = 2 * 4096
        let thumbnails = FileManagerThumbnails(library: store.library, mountPoint: mountPoint, cache: cache, limits: limits)
        thumbnails.publish(TestStore.roll, entries)
        thumbnails.publish(TestStore.roll, entries)
        #expect(written(cache).count == 2)
        #expect(lines.all.filter { $0.contains("thumbnail_space") }.count == 1, "\(lines.all)")
    }

    @Test("none is written while the cache's file system has less than a tenth of its blocks or of its inodes free")
    func freeFloor() throws {
        for free in [(blocks: 0.05, inodes: 0.5), (blocks: 0.5, inodes: 0.09)] {
            let lines = Lines()
            let (store, entries) = try photos(2, lines: lines)
            let cache = cache(of: store)
            var limits = FileManagerThumbnails.Limits()
            limits.free = { _ in free }
            let thumbnails = FileManagerThumbnails(library: store.library, mountPoint: mountPoint, cache: cache, limits: limits)
            thumbnails.publish(TestStore.roll, entries)
            thumbnails.publish(TestStore.roll, entries)
            #expect(written(cache).isEmpty)
            #expect(lines.all.filter { $0.contains("is free: no more are written") }.count == 1, "\(lines.all)")
        }
    }

    @Test("at most `remembered` thumbnails are remembered; the others are found on disk again, not written again")
    func rememberedBound() throws {
        let (store, entries) = try photos(5, lines: Lines())
        let cache = cache(of: store)
        var limits = FileManagerThumbnails.Limits()
        limits.remembered = 2
        let thumbnails = FileManagerThumbnails(library: store.library, mountPoint: mountPoint, cache: cache, limits: limits)
        thumbnails.publish(TestStore.roll, entries)
        #expect(thumbnails.rememberedCount <= 2)
        let inodes = written(cache).sorted().map { inode(cache + "/large/" + $0) }
        #expect(inodes.count == 5)
        thumbnails.publish(TestStore.roll, entries)
        #expect(written(cache).sorted().map { inode(cache + "/large/" + $0) } == inodes)
        #expect(thumbnails.rememberedCount <= 2)
    }

    @Test("the failed marker is a PNG: signature, IHDR 1 × 1, the text after it, IDAT and IEND with right CRCs")
    func blank() {
        let png = PNGText.adding(["Thumb::URI": "file:///x"], to: PNGText.blank)
        #expect(png.starts(with: PNGText.signature))
        #expect(PNGText.chunks(in: png[...]) == ["Thumb::URI": "file:///x"])
        // CRC-32 of "IEND" is AE426082 (the PNG spec's example).
        #expect(Array(png.suffix(4)) == [0xAE, 0x42, 0x60, 0x82])
    }
}

/// Log lines, from any thread.
final class Lines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.lock(); lines.append(line); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return lines }
}
