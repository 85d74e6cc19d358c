import Testing
@testable import AlbumCore

private let roll = TestStore.roll
private let albums = TestStore.albums
private let root = TestStore.root

extension TestStore {
    @discardableResult
    func rename(_ oldParent: NodeID, _ oldName: String, _ newParent: NodeID, _ newName: String,
                flags: Library.RenameFlags = []) throws -> ChangeSet {
        try library.rename(oldParent, Array(oldName.utf8), to: newParent, Array(newName.utf8), flags: flags)
    }
}

@Suite("Rename: albums")
struct AlbumRenameTests {
    @Test("mv Albums/A Albums/B renames the album with everything in it")
    func renameAlbum() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let file = try store.createFile(a, "x")
        let sub = try store.makeAlbum(a, "Sub")
        try store.rename(albums, "A", albums, "B")
        #expect(try store.id(albums, "A") == nil)
        #expect(try store.id(albums, "B") == a)
        #expect(try store.id(a, "x") == file)
        #expect(try store.id(a, "Sub") == sub)
        #expect(try store.id(roll, "x") == file)
    }

    @Test("mv Albums/A Albums/Trips/ moves the album")
    func moveAlbum() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let trips = try store.makeAlbum("Trips")
        let file = try store.createFile(a, "x")
        try store.rename(albums, "A", trips, "A")
        #expect(try store.id(albums, "A") == nil)
        #expect(try store.id(trips, "A") == a)
        #expect(try store.library.parent(ofDirectory: a) == trips)
        #expect(try store.library.attributes(of: trips).linkCount == 3)
        #expect(try store.id(a, "x") == file)
        // And back out, under a new name.
        try store.rename(trips, "A", albums, "A2")
        #expect(try store.library.parent(ofDirectory: a) == albums)
        #expect(try store.library.attributes(of: trips).linkCount == 2)
    }

    /// Where an album may not go: itself, its child, its grandchild. One move
    /// per case, and no check that walks the parent chain afterwards, so a
    /// regression that lets the move through fails instead of looping.
    @Test("moving an album into itself or its own sub-album: invalid argument", arguments: [0, 1, 2])
    func moveAlbumIntoItself(depth: Int) throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum(a, "B")
        let c = try store.makeAlbum(b, "C")
        let destination = [a, b, c][depth]
        #expect(throws: LibraryError.invalidArgument) { try store.rename(albums, "A", destination, "A") }
        #expect(try store.id(albums, "A") == a)
        #expect(try store.id(destination, "A") == nil)
        #expect(try store.library.parent(ofDirectory: a) == albums)
    }

    @Test("moving a sub-album into its own descendant: invalid argument; into a sibling: fine")
    func moveSubAlbumIntoDescendant() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum(a, "B")
        let c = try store.makeAlbum(b, "C")
        let d = try store.makeAlbum(a, "D")
        #expect(throws: LibraryError.invalidArgument) { try store.rename(a, "B", c, "B") }
        #expect(try store.library.parent(ofDirectory: b) == a)
        #expect(try store.id(c, "B") == nil)
        try store.rename(a, "B", d, "B")
        #expect(try store.library.parent(ofDirectory: b) == d)
        #expect(try store.id(d, "B") == b)
        #expect(try store.id(b, "C") == c)
    }

    @Test("an album cannot move into the roll or the root")
    func moveAlbumOutOfAlbums() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        #expect(throws: LibraryError.notPermitted) { try store.rename(albums, "A", roll, "A") }
        #expect(throws: LibraryError.notPermitted) { try store.rename(albums, "A", root, "A") }
        #expect(try store.id(albums, "A") == a)
    }

    @Test("an album renamed over an empty album replaces it; over a non-empty one: not empty")
    func renameAlbumOverAlbum() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let empty = try store.makeAlbum("Empty")
        let full = try store.makeAlbum("Full")
        try store.createFile(full, "x")
        #expect(throws: LibraryError.notEmpty) { try store.rename(albums, "A", albums, "Full") }
        #expect(throws: LibraryError.exists) { try store.rename(albums, "A", albums, "Empty", flags: .noReplace) }
        try store.rename(albums, "A", albums, "Empty")
        #expect(try store.id(albums, "Empty") == a)
        #expect(!store.exists(empty))
        #expect(try store.sortedNames(albums) == ["Empty", "Full"])
    }

    @Test("an album over a file, a file over an album: not a directory / is a directory")
    func albumFileMismatch() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        try store.makeAlbum(a, "Sub")
        try store.createFile(a, "x")
        #expect(throws: LibraryError.notDirectory) { try store.rename(a, "Sub", a, "x") }
        #expect(throws: LibraryError.isDirectory) { try store.rename(a, "x", a, "Sub") }
    }

    @Test("the fixed directories cannot be renamed")
    func renameFixed() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        #expect(throws: LibraryError.notPermitted) { try store.rename(root, "Camera Roll", root, "Roll") }
        #expect(throws: LibraryError.notPermitted) { try store.rename(root, "Albums", root, "Albums2") }
        #expect(throws: LibraryError.notPermitted) { try store.rename(root, "Albums", a, "Albums") }
        #expect(try store.sortedNames(root) == ["Albums", "By Date", "Camera Roll", "Hidden", "Recently Deleted", "Smart Albums"])
    }
}

@Suite("Rename: asset entries")
struct EntryRenameTests {
    @Test("a missing source: not found")
    func missingSource() throws {
        let store = try TestStore()
        #expect(throws: LibraryError.notFound) { try store.rename(roll, "nope", roll, "x") }
    }

    @Test("renaming in the roll renames the roll entry only")
    func renameInRoll() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(a, "x")
        try store.rename(roll, "x", roll, "y")
        #expect(try store.names(roll) == [name("y")])
        #expect(try store.id(roll, "y") == id)
        #expect(try store.id(a, "x") == id)  // the album entry keeps its name
    }

    @Test("mv Albums/A/x Albums/A/y: the roll entry follows")
    func renameInAlbumRollFollows() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(a, ".x.TMP")
        try store.rename(a, ".x.TMP", a, "x")
        #expect(try store.names(a) == [name("x")])
        #expect(try store.names(roll) == [name("x")])
        #expect(try store.id(roll, "x") == id)
    }

    @Test("the roll entry follows from an (n) form of the old name")
    func rollFollowsFromNumbered() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let first = try store.createFile(roll, "x.jpg")
        let id = try store.createFile(a, "x.jpg")
        #expect(try store.id(roll, "x (2).jpg") == id)
        try store.rename(a, "x.jpg", a, "y.jpg")
        #expect(try store.id(roll, "y.jpg") == id)
        #expect(try store.id(roll, "x (2).jpg") == nil)
        #expect(try store.id(roll, "x.jpg") == first)
    }

    @Test("the roll entry follows to the first free (n) form when the new name is taken in the roll")
    func rollFollowsToNumbered() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let y = try store.createFile(roll, "y.jpg")
        let y2 = try store.createFile(roll, "y (2).jpg")
        let id = try store.createFile(a, "x.jpg")
        try store.rename(a, "x.jpg", a, "y.jpg")
        #expect(try store.id(a, "y.jpg") == id)
        #expect(try store.id(roll, "y (3).jpg") == id)
        #expect(try store.id(roll, "x.jpg") == nil)
        #expect(try store.id(roll, "y.jpg") == y)
        #expect(try store.id(roll, "y (2).jpg") == y2)
    }

    @Test("a roll entry with an unrelated name stays as it is")
    func rollDoesNotFollowUnrelated() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(roll, "photo.jpg")
        _ = try store.library.link(id, into: a, named: name("x.jpg"))
        try store.rename(a, "x.jpg", a, "y.jpg")
        #expect(try store.names(roll) == [name("photo.jpg")])
        #expect(try store.id(a, "y.jpg") == id)
        // Nor does one that only looks numbered: "x (02).jpg" is not an (n) form of "x.jpg".
        let other = try store.createFile(roll, "x (02).jpg")
        _ = try store.library.link(other, into: a, named: name("x.jpg"))
        try store.rename(a, "x.jpg", a, "z.jpg")
        #expect(try store.id(roll, "x (02).jpg") == other)
    }

    @Test("mv Albums/A/x Albums/B/: moves the reference; the roll entry stays")
    func moveBetweenAlbumsKeepingName() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        try store.createFile(roll, "x")
        let id = try store.createFile(a, "x")
        #expect(try store.name(of: id, in: roll) == "x (2)")
        try store.rename(a, "x", b, "x")
        #expect(try store.id(a, "x") == nil)
        #expect(try store.id(b, "x") == id)
        #expect(try store.name(of: id, in: roll) == "x (2)")
        #expect(try store.library.attributes(of: id).linkCount == 2)
    }

    @Test("mv Albums/A/x Albums/B/y: moves and renames; the roll entry follows")
    func moveBetweenAlbumsRenaming() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        let id = try store.createFile(a, "x")
        try store.rename(a, "x", b, "y")
        #expect(try store.names(a).isEmpty)
        #expect(try store.id(b, "y") == id)
        #expect(try store.names(roll) == [name("y")])
    }

    @Test("mv \"Camera Roll/x\" Albums/A/: adds to A, stays in the roll")
    func rollToAlbumAdds() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(roll, "x", contents: bytes("data"))
        try store.rename(roll, "x", a, "z")
        #expect(try store.id(roll, "x") == id)
        #expect(try store.id(a, "z") == id)
        #expect(try store.library.attributes(of: id).linkCount == 2)
        #expect(try store.read(id) == bytes("data"))
    }

    @Test("mv Albums/A/x \"Camera Roll/y\": drops the reference and renames the roll entry")
    func albumToRoll() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        let id = try store.createFile(a, "x")
        _ = try store.library.link(id, into: b, named: name("bx"))
        try store.rename(a, "x", roll, "y")
        #expect(try store.names(a).isEmpty)
        #expect(try store.names(roll) == [name("y")])
        #expect(try store.id(roll, "y") == id)
        #expect(try store.id(b, "bx") == id)
        #expect(try store.library.attributes(of: id).linkCount == 2)
    }

    @Test("into an album that already holds the asset under another name: exists")
    func intoAlbumHoldingAsset() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        let id = try store.createFile(a, "x")
        _ = try store.library.link(id, into: b, named: name("w"))
        // From the roll.
        #expect(throws: LibraryError.exists) { try store.rename(roll, "x", a, "z") }
        // From another album.
        #expect(throws: LibraryError.exists) { try store.rename(b, "w", a, "z") }
        #expect(try store.names(a) == [name("x")])
        #expect(try store.names(b) == [name("w")])
        #expect(try store.names(roll) == [name("x")])
    }

    @Test("rename onto another name of the same asset does nothing")
    func renameOntoSameAsset() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(a, "x", contents: bytes("same"))
        _ = try store.rename(roll, "x", a, "x")
        _ = try store.rename(a, "x", roll, "x")
        _ = try store.rename(a, "x", a, "x")
        _ = try store.rename(roll, "x", roll, "x")
        #expect(try store.names(a) == [name("x")])
        #expect(try store.names(roll) == [name("x")])
        #expect(try store.library.attributes(of: id).linkCount == 2)
        #expect(try store.read(id) == bytes("same"))
        #expect(store.dataSize(of: id) == 4)
    }

    @Test("same-directory update in an album: the moving asset takes the replaced one's place everywhere")
    func updateInAlbum() throws {
        let store = try TestStore(options: .purgeAtOnce)
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        let old = try store.createFile(a, "x.jpg", mode: 0o644, contents: bytes("old version"))
        _ = try store.library.link(old, into: b, named: name("b-name.jpg"))
        let new = try store.createFile(a, ".x.jpg.TMP", mode: 0o600, contents: bytes("new"))
        _ = try store.library.setExtendedAttribute(new, name("user.mine"), bytes("v"), mode: .createOrReplace)
        // A temporary (dot) name is a side file of the album: not in the roll (SEMANTICS.md § side files).
        #expect(try store.sortedNames(roll) == ["x.jpg"])

        try store.rename(a, ".x.jpg.TMP", a, "x.jpg")

        #expect(try store.names(a) == [name("x.jpg")])
        #expect(try store.id(a, "x.jpg") == new)
        #expect(try store.names(roll) == [name("x.jpg")])
        #expect(try store.id(roll, "x.jpg") == new)
        #expect(try store.id(b, "b-name.jpg") == new)
        let attributes = try store.library.attributes(of: new)
        #expect(attributes.linkCount == 3)
        #expect(attributes.mode == 0o600)  // keeps its own metadata
        #expect(try store.read(new) == bytes("new"))
        #expect(try store.library.extendedAttribute(new, name("user.mine")) == bytes("v"))
        // The replaced asset is the original now: in no directory, its data kept
        // (SEMANTICS.md § Edits keep the original), also with no retention period.
        #expect(store.exists(old))
        #expect(try store.library.attributes(of: old).linkCount == 1)
        #expect(try store.read(old) == bytes("old version"))
        #expect(try store.id(FixedNode.originals, "x.jpg") == old)
        #expect(try assetCount(store) == 2)
    }

    @Test("update: where an album held both, the moving asset keeps its own entry and name")
    func updateWhereAlbumHeldBoth() throws {
        let store = try TestStore(options: .purgeAtOnce)
        let a = try store.makeAlbum("A")
        let c = try store.makeAlbum("C")
        let old = try store.createFile(a, "x")
        let new = try store.createFile(a, "x.tmp")
        _ = try store.library.link(old, into: c, named: name("c-old"))
        _ = try store.library.link(new, into: c, named: name("c-new"))

        try store.rename(a, "x.tmp", a, "x")

        #expect(try store.names(c) == [name("c-new")])
        #expect(try store.id(c, "c-new") == new)
        #expect(try store.id(a, "x") == new)
        #expect(try store.names(roll) == [name("x")])
        #expect(try store.library.attributes(of: new).linkCount == 3)
        #expect(try store.id(FixedNode.originals, "x") == old)
    }

    @Test("same-directory update in the roll: takes the roll name and the album entries")
    func updateInRoll() throws {
        let store = try TestStore(options: .purgeAtOnce)
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        let old = try store.createFile(roll, "x.jpg", contents: bytes("old"))
        _ = try store.library.link(old, into: a, named: name("a.jpg"))
        _ = try store.library.link(old, into: b, named: name("x.jpg"))
        let new = try store.createFile(roll, ".x.jpg.part", contents: bytes("new!"))

        try store.rename(roll, ".x.jpg.part", roll, "x.jpg")

        #expect(try store.names(roll) == [name("x.jpg")])
        #expect(try store.id(roll, "x.jpg") == new)
        #expect(try store.id(a, "a.jpg") == new)
        #expect(try store.id(b, "x.jpg") == new)
        #expect(try store.library.attributes(of: new).linkCount == 3)
        #expect(try store.read(new) == bytes("new!"))
        #expect(try store.id(FixedNode.originals, "x.jpg") == old)
        #expect(try store.read(old) == bytes("old"))
    }

    @Test("rename over a name in another album: the old asset loses that reference, stays in the roll")
    func crossDirectoryOverwriteInAlbum() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        let old = try store.createFile(a, "x", contents: bytes("old"))
        let new = try store.createFile(b, "n", contents: bytes("new"))

        try store.rename(b, "n", a, "x")

        #expect(try store.id(a, "x") == new)
        #expect(try store.names(b).isEmpty)
        #expect(try store.id(roll, "x") == old)
        #expect(try store.library.attributes(of: old).linkCount == 1)
        #expect(try store.read(old) == bytes("old"))
        // The new asset's roll entry followed "n" to "x", which is taken: "x (2)".
        #expect(try store.name(of: new, in: roll) == "x (2)")
        #expect(try store.library.attributes(of: new).linkCount == 2)
    }

    @Test("rename from the roll over a name in an album: replaces that entry only")
    func rollOverAlbumEntry() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let old = try store.createFile(a, "x")
        let new = try store.createFile(roll, "n")
        try store.rename(roll, "n", a, "x")
        #expect(try store.id(a, "x") == new)
        #expect(try store.id(roll, "n") == new)
        #expect(try store.id(roll, "x") == old)
        #expect(try store.library.attributes(of: old).linkCount == 1)
    }

    @Test("rename from an album over a name in the roll: the old asset is deleted")
    func crossDirectoryOverwriteInRoll() throws {
        let store = try TestStore(options: .purgeAtOnce)
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        let old = try store.createFile(roll, "x", contents: bytes("old"))
        _ = try store.library.link(old, into: a, named: name("ax"))
        let new = try store.createFile(b, "n", contents: bytes("new"))

        try store.rename(b, "n", roll, "x")

        #expect(try store.names(roll) == [name("x")])
        #expect(try store.id(roll, "x") == new)
        #expect(try store.names(b).isEmpty)
        #expect(try store.names(a).isEmpty)  // the old asset left every album
        #expect(!store.exists(old))
        #expect(store.dataSize(of: old) == nil)
        #expect(try store.library.attributes(of: new).linkCount == 1)
        #expect(try store.read(new) == bytes("new"))
    }

    @Test("noReplace: exists when the target exists, a plain rename otherwise")
    func noReplace() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let x = try store.createFile(a, "x")
        let y = try store.createFile(a, "y")
        #expect(throws: LibraryError.exists) { try store.rename(a, "x", a, "y", flags: .noReplace) }
        #expect(throws: LibraryError.exists) { try store.rename(roll, "x", roll, "y", flags: .noReplace) }
        #expect(try store.id(a, "x") == x)
        #expect(try store.id(a, "y") == y)
        try store.rename(a, "x", a, "z", flags: .noReplace)
        #expect(try store.id(a, "z") == x)
    }

    @Test("exchange: invalid argument, nothing changes")
    func exchange() throws {
        let store = try TestStore()
        let x = try store.createFile(roll, "x")
        let y = try store.createFile(roll, "y")
        #expect(throws: LibraryError.invalidArgument) { try store.rename(roll, "x", roll, "y", flags: .exchange) }
        #expect(try store.id(roll, "x") == x)
        #expect(try store.id(roll, "y") == y)
    }

    @Test("moving a file into Albums/ or the root: not permitted")
    func fileIntoAlbumsRoot() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(a, "x")
        #expect(throws: LibraryError.notPermitted) { try store.rename(a, "x", albums, "x") }
        #expect(throws: LibraryError.notPermitted) { try store.rename(roll, "x", albums, "x") }
        #expect(throws: LibraryError.notPermitted) { try store.rename(roll, "x", root, "x") }
        #expect(try store.id(a, "x") == id)
        #expect(try store.id(roll, "x") == id)
        #expect(try store.names(albums) == [name("A")])
    }

    @Test("rename to an invalid name fails before anything changes")
    func renameInvalidName() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x")
        #expect(throws: LibraryError.invalidArgument) { try store.rename(roll, "x", roll, "a/b") }
        #expect(throws: LibraryError.nameTooLong) {
            try store.library.rename(roll, name("x"), to: roll, [UInt8](repeating: 0x61, count: 256))
        }
        #expect(try store.id(roll, "x") == id)
    }
}
