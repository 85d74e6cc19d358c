import Testing
@testable import AlbumCore

private let roll = TestStore.roll
private let albums = TestStore.albums
private let root = TestStore.root

@Suite("Extended attributes")
struct ExtendedAttributesTests {
    @Test("user.* set, get, list and remove on an asset, seen from every entry")
    func userAttributesOnAsset() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        let id = try store.createFile(a, "x")
        let library = store.library
        try library.setExtendedAttribute(id, name("user.b"), bytes("two"), mode: .createOrReplace)
        try library.setExtendedAttribute(id, name("user.a"), [0, 1, 0xff], mode: .createOrReplace)
        try library.setExtendedAttribute(id, name("user.empty"), [], mode: .createOrReplace)
        #expect(try library.extendedAttribute(id, name("user.a")) == [0, 1, 0xff])
        #expect(try library.extendedAttribute(id, name("user.b")) == bytes("two"))
        #expect(try library.extendedAttribute(id, name("user.empty")) == [])
        #expect(Set(try library.extendedAttributeNames(id)) == Set([name("user.a"), name("user.b"), name("user.empty")]))
        // Replacing keeps one value.
        try library.setExtendedAttribute(id, name("user.b"), bytes("three"), mode: .createOrReplace)
        #expect(try library.extendedAttribute(id, name("user.b")) == bytes("three"))
        try library.removeExtendedAttribute(id, name("user.a"))
        #expect(throws: LibraryError.noAttribute) { try library.extendedAttribute(id, name("user.a")) }
        #expect(Set(try library.extendedAttributeNames(id)) == Set([name("user.b"), name("user.empty")]))
        // The asset is one node: the album entry and the roll entry are the same id.
        #expect(try store.id(roll, "x") == id)
    }

    @Test("user.* attributes on albums and fixed directories")
    func userAttributesOnDirectories() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        for id in [a, root, roll, albums] {
            try store.library.setExtendedAttribute(id, name("user.tag"), bytes("dir \(id)"), mode: .createOnly)
        }
        try store.reopen()
        for id in [a, root, roll, albums] {
            #expect(try store.library.extendedAttribute(id, name("user.tag")) == bytes("dir \(id)"))
            #expect(try store.library.extendedAttributeNames(id) == [name("user.tag")])
        }
    }

    @Test("attributes survive a reopen, byte for byte")
    func persistence() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x")
        let value = (0..<1000).map { UInt8($0 % 256) }
        try store.library.setExtendedAttribute(id, name("user.bin"), value, mode: .createOrReplace)
        try store.library.setExtendedAttribute(id, [0x75, 0x73, 0x65, 0x72, 0x2e, 0xff], bytes("odd name"), mode: .createOrReplace)
        try store.reopen()
        #expect(try store.library.extendedAttribute(id, name("user.bin")) == value)
        #expect(try store.library.extendedAttribute(id, [0x75, 0x73, 0x65, 0x72, 0x2e, 0xff]) == bytes("odd name"))
    }

    @Test("user.albumfs.id is readable, not listed, and cannot be set or removed")
    func reservedIdAttribute() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x")
        try store.library.setExtendedAttribute(id, name("user.other"), bytes("1"), mode: .createOrReplace)
        #expect(try store.library.extendedAttribute(id, name("user.albumfs.id")) == bytes(String(id)))
        #expect(try store.library.extendedAttributeNames(id) == [name("user.other")])
        #expect(throws: LibraryError.notPermitted) {
            try store.library.setExtendedAttribute(id, name("user.albumfs.id"), bytes("1"), mode: .createOrReplace)
        }
        #expect(throws: LibraryError.notPermitted) {
            try store.library.setExtendedAttribute(id, name("user.albumfs.new"), bytes("1"), mode: .createOrReplace)
        }
        #expect(throws: LibraryError.notPermitted) {
            try store.library.removeExtendedAttribute(id, name("user.albumfs.id"))
        }
        #expect(throws: LibraryError.noAttribute) {
            try store.library.extendedAttribute(id, name("user.albumfs.nothing"))
        }
        #expect(try store.library.extendedAttribute(id, name("user.albumfs.id")) == bytes(String(id)))
        #expect(try store.library.extendedAttributeNames(roll).isEmpty)
    }

    @Test("other namespaces: not supported", arguments: ["trusted.x", "security.x", "system.x", "x", "user"])
    func otherNamespaces(attribute: String) throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x")
        #expect(throws: LibraryError.attributeNotSupported) {
            try store.library.setExtendedAttribute(id, name(attribute), bytes("v"), mode: .createOrReplace)
        }
        #expect(throws: LibraryError.attributeNotSupported) { try store.library.extendedAttribute(id, name(attribute)) }
        #expect(throws: LibraryError.attributeNotSupported) { try store.library.removeExtendedAttribute(id, name(attribute)) }
        #expect(try store.library.extendedAttributeNames(id).isEmpty)
    }

    @Test("create-only on an existing attribute: exists; replace-only on a missing one: no attribute")
    func setModes() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x")
        try store.library.setExtendedAttribute(id, name("user.a"), bytes("1"), mode: .createOnly)
        #expect(throws: LibraryError.exists) {
            try store.library.setExtendedAttribute(id, name("user.a"), bytes("2"), mode: .createOnly)
        }
        #expect(try store.library.extendedAttribute(id, name("user.a")) == bytes("1"))
        #expect(throws: LibraryError.noAttribute) {
            try store.library.setExtendedAttribute(id, name("user.b"), bytes("2"), mode: .replaceOnly)
        }
        #expect(throws: LibraryError.noAttribute) { try store.library.extendedAttribute(id, name("user.b")) }
        try store.library.setExtendedAttribute(id, name("user.a"), bytes("3"), mode: .replaceOnly)
        #expect(try store.library.extendedAttribute(id, name("user.a")) == bytes("3"))
        #expect(throws: LibraryError.noAttribute) { try store.library.removeExtendedAttribute(id, name("user.b")) }
    }

    @Test("values up to 64 KiB are stored; larger: value too large")
    func valueSizeLimit() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x")
        let largest = [UInt8](repeating: 0x61, count: 65536)
        try store.library.setExtendedAttribute(id, name("user.big"), largest, mode: .createOrReplace)
        #expect(try store.library.extendedAttribute(id, name("user.big")) == largest)
        #expect(throws: LibraryError.valueTooLarge) {
            try store.library.setExtendedAttribute(id, name("user.big"), largest + [0x61], mode: .createOrReplace)
        }
        #expect(try store.library.extendedAttribute(id, name("user.big")).count == 65536)
    }

    @Test("attributes of a missing node: not found")
    func missingNode() throws {
        let store = try TestStore()
        #expect(throws: LibraryError.notFound) { try store.library.extendedAttribute(999_999, name("user.a")) }
        #expect(throws: LibraryError.notFound) { try store.library.extendedAttributeNames(999_999) }
        #expect(throws: LibraryError.notFound) {
            try store.library.setExtendedAttribute(999_999, name("user.a"), [], mode: .createOrReplace)
        }
        #expect(throws: LibraryError.notFound) { try store.library.extendedAttribute(999_999, name("user.albumfs.id")) }
    }

    @Test("an update keeps the moving asset's attributes; the replaced asset keeps its own, read-only, as the original")
    func updateKeepsOwnAttributes() throws {
        let store = try TestStore(options: .purgeAtOnce)
        let old = try store.createFile(roll, "x")
        let new = try store.createFile(roll, "x.tmp")
        try store.library.setExtendedAttribute(old, name("user.v"), bytes("old"), mode: .createOrReplace)
        try store.library.setExtendedAttribute(new, name("user.v"), bytes("new"), mode: .createOrReplace)
        _ = try store.library.rename(roll, name("x.tmp"), to: roll, name("x"))
        #expect(try store.library.extendedAttribute(new, name("user.v")) == bytes("new"))
        #expect(try store.library.extendedAttribute(old, name("user.v")) == bytes("old"))
        #expect(throws: LibraryError.notPermitted) {
            try store.library.setExtendedAttribute(old, name("user.v"), bytes("x"), mode: .createOrReplace)
        }
    }

    @Test("setting an attribute changes ctime")
    func setChangesCtime() throws {
        let store = try TestStore()
        let id = try store.createFile(roll, "x")
        _ = try store.library.setAttributes(id, AttributeChanges(modificationTime: .set(1)))
        let before = try store.library.attributes(of: id).changeTime
        let start = currentTime()
        try store.library.setExtendedAttribute(id, name("user.a"), bytes("1"), mode: .createOrReplace)
        let after = try store.library.attributes(of: id)
        #expect(after.changeTime >= start)
        #expect(after.changeTime >= before)
        #expect(after.modificationTime == 1)
    }
}
