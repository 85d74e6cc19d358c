import Testing
@testable import AlbumCore

private let roll = TestStore.roll

/// SEMANTICS.md § Files that are not photos: side files.
@Suite("Side files: files programs write next to photos never become assets")
struct SideFileTests {
    @Test("side-file names", arguments: [
        (".DS_Store", true), ("._beach.jpg", true), (".x.jpg.swp", true), (".goutputstream-AB12CD", true),
        (".x.jpg.Ab12Cd", true), ("Thumbs.db", true), ("desktop.ini", true), ("~$report.docx", true),
        ("movie.mp4.part", true), ("video.crdownload", true),
        ("beach.jpg", false), ("thumbs.db", false), ("x.partial", false), (".part", true), ("part", false),
        ("IMG_1 (2).JPG", false), ("a~$b", false),
    ])
    func names(_ text: String, _ isSide: Bool) {
        #expect(Names.isSideFileName(name(text)) == isSide)
    }

    @Test("created in an album: in that album only (nlink 1, no roll entry, not counted), works like a file; rm removes it")
    func createdInAlbum() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(a, "._beach.jpg", contents: bytes("appledouble"))
        try store.createFile(a, "Thumbs.db")
        #expect(try store.names(roll).isEmpty)
        #expect(try store.sortedNames(a) == ["._beach.jpg", "Thumbs.db"])
        #expect(try store.library.attributes(of: id).linkCount == 1)
        #expect(try store.library.attributes(of: id).kind == .sideFile)
        #expect(try store.read(id) == bytes("appledouble"))
        #expect(try assetCount(store) == 0)
        _ = try store.library.setExtendedAttribute(id, name("user.x"), bytes("1"), mode: .createOrReplace)
        try store.unlink(a, "._beach.jpg")
        #expect(!store.exists(id))
        #expect(store.dataSize(of: id) == nil)
        #expect(try store.names(roll).isEmpty)
        // An album holding only side files is not empty.
        #expect(throws: LibraryError.notEmpty) { try store.library.removeAlbum(TestStore.albums, name("A")) }
    }

    @Test("renamed to an ordinary name in an album: becomes an asset in the roll and the album, no copy")
    func renamedBecomesAsset() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(a, ".beach.jpg.Ab12Cd", contents: bytes("photo"))
        try store.rename(a, ".beach.jpg.Ab12Cd", to: a, "beach.jpg")
        #expect(try store.id(a, "beach.jpg") == id)
        #expect(try store.id(roll, "beach.jpg") == id)
        #expect(try store.library.attributes(of: id).kind == .asset)
        #expect(try store.library.attributes(of: id).linkCount == 2)
        #expect(try store.read(id) == bytes("photo"))
        #expect(try assetCount(store) == 1)
    }

    @Test("renamed over an asset in the same album: the update rule (the old one kept as the original, albums handed over)")
    func renamedOverAssetIsUpdate() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        let old = try store.createFile(a, "x.jpg", contents: bytes("old"))
        _ = try store.library.link(old, into: b, named: name("bx.jpg"))
        let new = try store.createFile(a, ".x.jpg.tmp", contents: bytes("new"))
        #expect(try store.names(roll) == [name("x.jpg")])
        try store.rename(a, ".x.jpg.tmp", to: a, "x.jpg")
        #expect(try store.id(a, "x.jpg") == new)
        #expect(try store.id(b, "bx.jpg") == new)
        #expect(try store.names(roll) == [name("x.jpg")])
        #expect(try store.id(roll, "x.jpg") == new)
        // The first version is kept as its original (SEMANTICS.md § Edits keep the original).
        #expect(try store.id(FixedNode.originals, "x.jpg") == old)
        #expect(try store.names(FixedNode.recentlyDeleted).isEmpty)
    }

    @Test("in the roll: a side file, renamed to an ordinary name becomes an asset; roll → album as if created there")
    func sideFilesInRoll() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let first = try store.createFile(roll, ".p1.jpg.XXXX", contents: bytes("1"))
        #expect(try assetCount(store) == 0)
        try store.rename(roll, ".p1.jpg.XXXX", to: roll, "p1.jpg")
        #expect(try store.id(roll, "p1.jpg") == first)
        #expect(try assetCount(store) == 1)
        let second = try store.createFile(roll, "p2.jpg.part")
        try store.rename(roll, "p2.jpg.part", to: a, "p2.jpg")
        #expect(try store.id(roll, "p2.jpg") == second)
        #expect(try store.id(a, "p2.jpg") == second)
        #expect(try store.names(roll).count == 2)
    }

    @Test("renamed to another side-file name it stays one; an existing asset stays an asset under any name")
    func staysWhatItIs() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let side = try store.createFile(a, ".x.swp")
        try store.rename(a, ".x.swp", to: a, ".x.swo")
        #expect(try store.library.attributes(of: side).kind == .sideFile)
        let asset = try store.createFile(a, "photo.jpg")
        try store.rename(a, "photo.jpg", to: a, ".photo.jpg")
        #expect(try store.library.attributes(of: asset).kind == .asset)
        #expect(try store.id(roll, ".photo.jpg") == asset)
    }

    @Test("rm -r of an album removes its side files; fsck knows side files")
    func removedWithAlbum() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let side = try store.createFile(a, ".DS_Store", contents: bytes("ds"))
        let photo = try store.createFile(a, "p.jpg")
        try store.unlink(a, ".DS_Store")
        try store.unlink(a, "p.jpg")
        _ = try store.library.removeAlbum(TestStore.albums, name("A"))
        #expect(!store.exists(side))
        #expect(store.exists(photo))
        store.close()
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
    }

    @Test("an album trashed and emptied takes its side files; restored, it brings them back")
    func trashedAlbumSideFiles() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let side = try store.createFile(a, "desktop.ini", contents: bytes("ini"))
        let trash = try store.trash()
        try store.rename(TestStore.albums, "A", to: trash.files, "A")
        try store.rename(trash.files, "A", to: TestStore.albums, "A")
        #expect(try store.id(a, "desktop.ini") == side)
        try store.rename(TestStore.albums, "A", to: trash.files, "A")
        _ = try store.library.removeAlbum(trash.files, name("A"))
        #expect(!store.exists(side))
        #expect(store.dataSize(of: side) == nil)
        store.close()
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
    }
}
