import Testing
@testable import AlbumCore

private let roll = TestStore.roll
private let hidden = FixedNode.hidden
private let edited = FixedNode.edited
private let originals = FixedNode.originals
private let recentlyDeleted = FixedNode.recentlyDeleted
private let favorites = FixedNode.favorites

extension TestStore {
    /// An editor's safe save: write `.NAME.tmp` beside NAME, rename it over.
    @discardableResult
    func save(_ directory: NodeID, _ entry: String, _ contents: String) throws -> NodeID {
        let id = try createFile(directory, ".\(entry).tmp", contents: bytes(contents))
        try rename(directory, ".\(entry).tmp", to: directory, entry)
        return id
    }

    func assetIdentifier(_ id: NodeID) throws -> String {
        String(decoding: try library.extendedAttribute(id, AlbumCoreTests.name("user.albumfs.asset")), as: UTF8.self)
    }

    func checkIsClean() throws {
        library.waitForFreedData()
        let problems = try StoreChecker(location: location).check(repair: false).map(\.description)
        #expect(problems == [], "fsck: \(problems)")
    }
}

@Suite("One asset: edits keep the original (SEMANTICS.md § Edits keep the original)")
struct EditsKeepTheOriginalTests {
    @Test("three saves over a photo: albums, favorite and identifier stay; the first version is the original, byte for byte, never in Recently Deleted; revert gives it back everywhere")
    func threeEditsThenRevert() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        let first = try store.createFile(a, "x.jpg", contents: bytes("version 1"))
        _ = try store.library.link(first, into: b, named: name("b.jpg"))
        _ = try store.library.link(first, into: favorites, named: name("x.jpg"))
        #expect(try store.assetIdentifier(first) == String(first))

        try store.save(a, "x.jpg", "version 2")
        let second = try #require(try store.id(roll, "x.jpg"))
        try store.save(roll, "x.jpg", "version 3")
        let last = try store.save(b, "b.jpg", "version 4")

        #expect(try store.id(roll, "x.jpg") == last)
        #expect(try store.id(a, "x.jpg") == last)
        #expect(try store.id(b, "b.jpg") == last)
        #expect(try store.id(favorites, "x.jpg") == last, "the favorite flag stays with the asset")
        #expect(try store.assetIdentifier(last) == String(first))
        #expect(try store.sortedNames(edited) == ["x.jpg"])
        #expect(try store.id(originals, "x.jpg") == first)
        #expect(try store.read(try #require(try store.id(originals, "x.jpg"))) == bytes("version 1"))
        // The two intermediate versions are in Recently Deleted, as assets of their own; the original is not.
        let deleted = try store.names(recentlyDeleted).compactMap { try store.id(recentlyDeleted, $0) }
        #expect(deleted.count == 2 && !deleted.contains(first) && deleted.contains(second))
        #expect(try store.assetIdentifier(second) == String(second))

        // Revert to Original: onto the roll name.
        try store.rename(originals, "x.jpg", to: roll, "x.jpg")
        #expect(try store.id(roll, "x.jpg") == first)
        #expect(try store.id(a, "x.jpg") == first)
        #expect(try store.id(b, "b.jpg") == first)
        #expect(try store.id(favorites, "x.jpg") == first)
        #expect(try store.read(first) == bytes("version 1"))
        #expect(try store.library.attributes(of: first).linkCount == 3)
        #expect(try store.names(edited).isEmpty)
        #expect(try store.names(originals).isEmpty)
        #expect(try store.name(of: last, in: recentlyDeleted) != nil, "the edited version goes to Recently Deleted")
        #expect(try store.assetIdentifier(last) == String(last))
        #expect(try store.assetIdentifier(first) == String(first))
        try store.checkIsClean()
    }

    @Test("revert onto an album name works; onto any other name or place: EPERM; the original is read-only")
    func revertRulesAndReadOnly() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let first = try store.createFile(a, "x.jpg", contents: bytes("one"))
        _ = try store.createFile(roll, "other.jpg", contents: bytes("other"))
        try store.save(a, "x.jpg", "two")
        #expect(throws: LibraryError.notPermitted) { try store.rename(originals, "x.jpg", to: roll, "y.jpg") }
        #expect(throws: LibraryError.notPermitted) { try store.rename(originals, "x.jpg", to: roll, "other.jpg") }
        #expect(throws: LibraryError.notPermitted) { try store.rename(originals, "x.jpg", to: a, "new.jpg") }
        #expect(throws: LibraryError.notPermitted) { _ = try store.library.open(first, writable: true, truncate: false) }
        #expect(throws: LibraryError.notPermitted) { _ = try store.library.setAttributes(first, AttributeChanges(mode: 0o600)) }
        #expect(throws: LibraryError.notPermitted) {
            try store.library.setExtendedAttribute(first, name("user.x"), bytes("1"), mode: .createOrReplace)
        }
        #expect(throws: LibraryError.notPermitted) { _ = try store.library.link(first, into: a, named: name("copy.jpg")) }
        #expect(throws: LibraryError.notPermitted) { try store.createFile(originals, "new.jpg") }
        try store.rename(originals, "x.jpg", to: a, "x.jpg")
        #expect(try store.id(roll, "x.jpg") == first)
        #expect(try store.id(a, "x.jpg") == first)
        try store.checkIsClean()
    }

    @Test("rm in Originals discards the original for good; deleting the edited asset takes its original along, restoring brings it back, purging purges both")
    func discardDeleteRestorePurge() throws {
        let store = try TestStore()
        let first = try store.createFile(roll, "x.jpg", contents: bytes("one"))
        let second = try store.save(roll, "x.jpg", "two")
        try store.unlink(originals, "x.jpg")
        #expect(!store.exists(first))
        #expect(store.dataSize(of: first) == nil)
        #expect(try store.names(edited).isEmpty)
        #expect(try store.names(recentlyDeleted).isEmpty)
        #expect(try store.id(roll, "x.jpg") == second)

        let kept = try store.createFile(roll, "y.jpg", contents: bytes("y1"))
        let edit = try store.save(roll, "y.jpg", "y2")
        try store.unlink(roll, "y.jpg")
        #expect(try store.names(originals).isEmpty, "a deleted asset's original shows nowhere")
        #expect(try store.sortedNames(recentlyDeleted) == ["y.jpg"])
        try store.rename(recentlyDeleted, "y.jpg", to: roll, "y.jpg")
        #expect(try store.id(originals, "y.jpg") == kept)
        try store.unlink(roll, "y.jpg")
        try store.unlink(recentlyDeleted, "y.jpg")
        #expect(!store.exists(edit) && !store.exists(kept))
        #expect(store.dataSize(of: kept) == nil)
        try store.checkIsClean()
    }

    @Test("the original and the identifier survive a remount, and fsck knows an original is in no directory")
    func survivesReopen() throws {
        let store = try TestStore()
        let first = try store.createFile(roll, "x.jpg", contents: bytes("one"))
        let second = try store.save(roll, "x.jpg", "two")
        try store.reopen()
        #expect(try store.id(originals, "x.jpg") == first)
        #expect(try store.assetIdentifier(second) == String(first))
        try store.checkIsClean()
    }
}

@Suite("One asset: Hidden (SEMANTICS.md § Hidden)")
struct HiddenTests {
    @Test("hiding from an album: out of the roll, every album, the smart albums and By Date; Hidden lists it; showing it brings every membership back")
    func hideAndShow() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        let id = try store.createFile(a, "x.jpg", contents: bytes("secret"))
        _ = try store.library.link(id, into: b, named: name("bx.jpg"))
        _ = try store.library.link(id, into: favorites, named: name("x.jpg"))

        try store.rename(a, "x.jpg", to: hidden, "x.jpg")
        #expect(try store.names(roll).isEmpty)
        #expect(try store.names(a).isEmpty && store.names(b).isEmpty)
        #expect(try store.names(favorites).isEmpty)
        #expect(try store.id(hidden, "x.jpg") == id)
        #expect(try store.library.attributes(of: id).linkCount == 1)
        #expect(try store.read(id) == bytes("secret"), "a hidden asset reads as any")
        #expect(throws: LibraryError.notPermitted) { _ = try store.library.link(id, into: a, named: name("x.jpg")) }
        try store.checkIsClean()

        try store.rename(hidden, "x.jpg", to: roll, "shown.jpg")
        #expect(try store.id(roll, "shown.jpg") == id)
        #expect(try store.id(a, "x.jpg") == id)
        #expect(try store.id(b, "bx.jpg") == id)
        #expect(try store.id(favorites, "shown.jpg") == id)
        #expect(try store.names(hidden).isEmpty)
        #expect(try store.library.attributes(of: id).linkCount == 3)
        try store.checkIsClean()
    }

    @Test("showing into an album adds it there too; the roll name takes the (n) rule")
    func showIntoAlbum() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let c = try store.makeAlbum("C")
        let id = try store.createFile(a, "x.jpg")
        try store.rename(roll, "x.jpg", to: hidden, "x.jpg")
        let other = try store.createFile(roll, "x.jpg")
        try store.rename(hidden, "x.jpg", to: c, "c.jpg")
        #expect(try store.id(roll, "x.jpg") == other)
        #expect(try store.id(roll, "x (2).jpg") == id)
        #expect(try store.id(a, "x.jpg") == id)
        #expect(try store.id(c, "c.jpg") == id)
        try store.checkIsClean()
    }

    @Test("rm in Hidden deletes to Recently Deleted with the memberships; a restore shows it in the roll and its albums")
    func deleteFromHidden() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(a, "x.jpg")
        try store.rename(a, "x.jpg", to: hidden, "h.jpg")
        try store.unlink(hidden, "h.jpg")
        #expect(try store.id(recentlyDeleted, "h.jpg") == id)
        try store.rename(recentlyDeleted, "h.jpg", to: roll, "h.jpg")
        #expect(try store.id(roll, "h.jpg") == id)
        #expect(try store.id(a, "x.jpg") == id)
        try store.checkIsClean()
    }

    @Test("the file manager's trash from Hidden: Restore puts it back in Hidden")
    func trashAndRestoreIntoHidden() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x.jpg")
        try store.rename(roll, "x.jpg", to: hidden, "x.jpg")
        let trash = try store.trash()
        try store.rename(hidden, "x.jpg", to: trash.files, "x.jpg")
        #expect(try store.id(recentlyDeleted, "x.jpg") == id)
        try store.rename(trash.files, "x.jpg", to: hidden, "x.jpg")
        #expect(try store.id(hidden, "x.jpg") == id)
        #expect(try store.names(roll).isEmpty)
        #expect(try store.names(recentlyDeleted).isEmpty)
        try store.checkIsClean()
    }

    @Test("created in Hidden: hidden from the start (rsync's temporary side file included); an update there keeps the original; no ln, no mkdir")
    func createAndEditInHidden() throws {
        let store = try TestStore()
        let first = try store.createFile(hidden, "x.jpg", contents: bytes("one"))
        #expect(try store.names(roll).isEmpty)
        let second = try store.save(hidden, "x.jpg", "two")
        #expect(try store.sortedNames(hidden) == ["x.jpg"])
        #expect(try store.id(hidden, "x.jpg") == second)
        #expect(try store.names(roll).isEmpty)
        #expect(try store.assetIdentifier(second) == String(first))
        #expect(try store.read(first) == bytes("one"))
        #expect(try store.names(recentlyDeleted).isEmpty)
        let visible = try store.createFile(roll, "v.jpg")
        #expect(throws: LibraryError.notPermitted) { _ = try store.library.link(visible, into: hidden, named: name("v.jpg")) }
        #expect(throws: LibraryError.notPermitted) { try store.makeAlbum(hidden, "sub") }
        // Shown again, the edit and its original come along.
        try store.rename(hidden, "x.jpg", to: roll, "x.jpg")
        #expect(try store.id(originals, "x.jpg") == first)
        try store.checkIsClean()
    }

    @Test("hiding over a hidden asset's name replaces it (to Recently Deleted); Hidden/ is 0700, its owner's")
    func hideOverAndMode() throws {
        let store = try TestStore()
        let one = try store.createFile(roll, "one.jpg")
        let two = try store.createFile(roll, "two.jpg")
        try store.rename(roll, "one.jpg", to: hidden, "h.jpg")
        try store.rename(roll, "two.jpg", to: hidden, "h.jpg")
        #expect(try store.id(hidden, "h.jpg") == two)
        #expect(try store.id(recentlyDeleted, "h.jpg") == one)
        let attributes = try store.library.attributes(of: hidden)
        #expect(attributes.mode == 0o700)
        #expect(attributes.uid == TestStore.owner.uid)
        try store.checkIsClean()
    }
}

@Suite("One asset: pairs (SEMANTICS.md § Pairs)")
struct PairsTests {
    static let still = "kind=photo\ntype=image/heic\ncid=ABC-123"
    static let video = "kind=video\ntype=video/quicktime\ncid=ABC-123"

    @Test("a Live Photo whose halves went to two albums: after its facts, one asset in both albums; ln, rm in an album, delete, restore, hide and show act on both")
    func livePhotoActsAsOne() throws {
        let store = try indexedStore()
        let a = try store.makeAlbum("A")
        let b = try store.makeAlbum("B")
        let c = try store.makeAlbum("C")
        let still = try store.createFile(a, "IMG_1.HEIC", contents: bytes(Self.still))
        let video = try store.createFile(b, "IMG_1.MOV", contents: bytes(Self.video))
        settled(store)
        #expect(try store.sortedNames(a) == ["IMG_1.HEIC", "IMG_1.MOV"])
        #expect(try store.sortedNames(b) == ["IMG_1.HEIC", "IMG_1.MOV"])
        #expect(try store.assetIdentifier(video) == store.assetIdentifier(still))
        #expect(try store.library.attributes(of: video).linkCount == 3)

        _ = try store.library.link(video, into: c, named: name("clip.mov"))
        #expect(try store.sortedNames(c) == ["IMG_1.HEIC", "clip.mov"])
        try store.unlink(a, "IMG_1.MOV")
        #expect(try store.names(a).isEmpty, "rm of either in an album takes the asset out of it")
        #expect(try store.sortedNames(roll) == ["IMG_1.HEIC", "IMG_1.MOV"])

        try store.unlink(roll, "IMG_1.HEIC")
        #expect(try store.names(roll).isEmpty && store.names(b).isEmpty && store.names(c).isEmpty)
        #expect(try store.sortedNames(FixedNode.recentlyDeleted) == ["IMG_1.HEIC", "IMG_1.MOV"])
        try store.rename(FixedNode.recentlyDeleted, "IMG_1.MOV", to: roll, "IMG_1.MOV")
        #expect(try store.sortedNames(roll) == ["IMG_1.HEIC", "IMG_1.MOV"])
        #expect(try store.sortedNames(b) == ["IMG_1.HEIC", "IMG_1.MOV"])
        #expect(try store.sortedNames(c) == ["IMG_1.HEIC", "clip.mov"])
        #expect(try store.names(FixedNode.recentlyDeleted).isEmpty)

        try store.rename(c, "clip.mov", to: hidden, "clip.mov")
        #expect(try store.names(roll).isEmpty && store.names(b).isEmpty)
        #expect(try store.sortedNames(hidden) == ["IMG_1.HEIC", "clip.mov"])
        try store.rename(hidden, "IMG_1.HEIC", to: roll, "IMG_1.HEIC")
        // The video comes back under the name it was hidden as; its albums keep theirs.
        #expect(try store.sortedNames(roll) == ["IMG_1.HEIC", "clip.mov"])
        #expect(try store.sortedNames(b) == ["IMG_1.HEIC", "IMG_1.MOV"])
        #expect(try store.sortedNames(c) == ["IMG_1.HEIC", "clip.mov"])
        try store.checkIsClean()
    }

    @Test("RAW+JPEG of one shot pair (same stem, same capture time); ln adds both; unpair makes two assets, each in the pair's albums; purge takes both")
    func rawPlusJPEGAndUnpair() throws {
        let store = try indexedStore()
        let jpeg = try store.createFile(roll, "DSC_7.JPG", contents: bytes("kind=photo\ntype=image/jpeg\ncaptured=2024-07-01T10:00:00"))
        let raw = try store.createFile(roll, "DSC_7.NEF", contents: bytes("kind=photo\ntype=image/x-nikon-nef\nraw=1\ncaptured=2024-07-01T10:00:00"))
        _ = try store.createFile(roll, "DSC_8.JPG", contents: bytes("kind=photo\ntype=image/jpeg\ncaptured=2024-07-01T10:00:01"))
        settled(store)
        #expect(try store.assetIdentifier(raw) == store.assetIdentifier(jpeg))
        let c = try store.makeAlbum("C")
        _ = try store.library.link(jpeg, into: c, named: name("best.jpg"))
        #expect(try store.sortedNames(c) == ["DSC_7.NEF", "best.jpg"])

        try store.library.setExtendedAttribute(raw, name("user.albumfs.unpair"), bytes("1"), mode: .createOrReplace)
        #expect(try store.assetIdentifier(raw) == String(raw))
        #expect(try store.assetIdentifier(jpeg) == String(jpeg))
        #expect(throws: LibraryError.invalidArgument) {
            try store.library.setExtendedAttribute(raw, name("user.albumfs.unpair"), bytes("1"), mode: .createOrReplace)
        }
        try store.unlink(c, "best.jpg")
        #expect(try store.sortedNames(c) == ["DSC_7.NEF"], "unpaired: each its own asset")
        try store.checkIsClean()

        let store2 = try indexedStore(trashDays: 0)
        let j = try store2.createFile(roll, "P.JPG", contents: bytes("kind=photo\ntype=image/jpeg"))
        let r = try store2.createFile(roll, "P.DNG", contents: bytes("kind=photo\nraw=1"))
        settled(store2)
        #expect(try store2.assetIdentifier(r) == String(j), "taken together: imported within a minute")
        try store2.unlink(roll, "P.DNG")
        #expect(!store2.exists(j) && !store2.exists(r))
        try store2.checkIsClean()
    }

    @Test("no pair when the other half is ambiguous; an edit of a paired still keeps the pair")
    func ambiguityAndEdits() throws {
        let store = try indexedStore()
        let video = try store.createFile(roll, "a.mov", contents: bytes(Self.video))
        _ = try store.createFile(roll, "b.heic", contents: bytes(Self.still))
        _ = try store.createFile(roll, "c.heic", contents: bytes(Self.still + "\nwidth=2"))
        settled(store)
        #expect(try store.assetIdentifier(video) == String(video), "two stills for one video: no pair")

        let other = try indexedStore()
        let still = try other.createFile(roll, "x.heic", contents: bytes(Self.still))
        let clip = try other.createFile(roll, "x.mov", contents: bytes(Self.video))
        settled(other)
        let edited = try other.save(roll, "x.heic", Self.still + "\nwidth=7")
        settled(other)
        #expect(try other.assetIdentifier(edited) == other.assetIdentifier(clip))
        let a = try other.makeAlbum("A")
        _ = try other.library.link(clip, into: a, named: name("x.mov"))
        #expect(try other.sortedNames(a) == ["x.heic", "x.mov"])
        #expect(try other.id(FixedNode.originals, "x.heic") == still)
        try other.checkIsClean()
    }

    @Test("dedupe keeps the member of a pair, so the other half is never deleted with a duplicate")
    func dedupeKeepsThePair() throws {
        let store = try indexedStore()
        let jpeg = "kind=photo\ntype=image/jpeg"
        let copy = try store.createFile(roll, "copy.JPG", contents: bytes(jpeg))
        let paired = try store.createFile(roll, "DSC_1.JPG", contents: bytes(jpeg))
        let raw = try store.createFile(roll, "DSC_1.NEF", contents: bytes("kind=photo\nraw=1"))
        settled(store)
        #expect(try store.assetIdentifier(raw) == String(paired))
        let sets = try store.library.dedupe(dryRun: false, hashing: LineFactsReader())
        #expect(sets.map(\.kept) == [paired])
        #expect(try store.sortedNames(roll) == ["DSC_1.JPG", "DSC_1.NEF"])
        #expect(try store.name(of: copy, in: FixedNode.recentlyDeleted) == "copy.JPG")
        try store.checkIsClean()
    }
}
