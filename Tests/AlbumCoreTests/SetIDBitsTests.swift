import Testing
@testable import AlbumCore

/// SEMANTICS.md § Durability and safety: set-ID bits go as Linux's fs/attr.c takes them.
@Suite("Set-ID bits: which a write and a chown clear")
struct SetIDBitsTests {
    private func asset(_ mode: UInt32, gid: UInt32 = 100) -> Attributes {
        let store = try! TestStore()
        let id = try! store.createFile(TestStore.roll, "x")
        var a = try! store.library.attributes(of: id)
        a.mode = mode
        a.gid = gid
        return a
    }
    private let root = Caller(uid: 0, gid: 0)
    private let member = Caller(uid: 1000, gid: 100)
    private let stranger = Caller(uid: 1001, gid: 200)

    @Test("a write by root clears nothing; by anyone else both bits of a group-executable file")
    func writes() {
        #expect(SetIDBits.droppedByWriting(asset(0o6777), by: root) == 0)
        #expect(SetIDBits.droppedByWriting(asset(0o6777), by: member) == 0o6000)
        #expect(SetIDBits.droppedByWriting(asset(0o4755), by: member) == 0o4000)
    }

    @Test("set-group-ID without group execute: kept for a member of the file's group, cleared for others")
    func setGroupIDWithoutExecute() {
        #expect(SetIDBits.droppedByWriting(asset(0o2644), by: member) == 0)
        #expect(SetIDBits.droppedByWriting(asset(0o2644), by: stranger) == 0o2000)
        #expect(SetIDBits.droppedByChown(asset(0o2644), by: root) == 0)
        #expect(SetIDBits.droppedByChown(asset(0o2644), by: stranger) == 0o2000)
    }

    @Test("a chown clears set-user-ID by anyone, root included")
    func chown() {
        #expect(SetIDBits.droppedByChown(asset(0o4755), by: root) == 0o4000)
        #expect(SetIDBits.droppedByChown(asset(0o6555), by: root) == 0o6000)
        #expect(SetIDBits.droppedByChown(asset(0o6555), by: member) == 0o6000)
    }
}
