#if canImport(Glibc)
import Glibc
#endif
import Testing
import SQLiteKit
@testable import AlbumCore

/// Handles whose writes bypass the daemon (FUSE passthrough): the tests write
/// to the handle's content descriptor with pwrite, as the kernel would.
@Suite("Direct writes: size and mtime from the content file")
struct DirectWriteTests {
    /// A new asset in `parent`, open for writing with its writes bypassing the daemon.
    private func openDirect(_ store: TestStore, in parent: NodeID = TestStore.roll, named name: String = "x") throws -> (NodeID, OpenFile) {
        let id = try store.createFile(parent, name)
        let file = try store.library.open(id, writable: true, truncate: false)
        store.library.writesBypassDaemon(file)
        return (id, file)
    }

    private func writeBehind(_ file: OpenFile, _ data: [UInt8], at offset: Int) {
        let written = data.withUnsafeBytes { pwrite(file.descriptor, $0.baseAddress!, data.count, off_t(offset)) }
        #expect(written == data.count)
    }

    /// The assets marked as being written, as another connection sees them.
    private func markedIDs(_ store: TestStore) throws -> [NodeID] {
        let db = try Database(path: store.location.databasePath, mode: .readOnly)
        let marked = try db.statement("SELECT id FROM unfinished_writes")
        var ids: [NodeID] = []
        while try marked.step() { ids.append(NodeID(marked.int64(0))) }
        return ids
    }

    @Test("getattr and listings show what was written behind the daemon's back")
    func liveState() throws {
        let store = try TestStore()
        let album = try store.makeAlbum("A")
        let (id, file) = try openDirect(store, in: album)
        let before = try store.library.attributes(of: id).modificationTime
        usleep(20_000)
        writeBehind(file, [UInt8](repeating: 1, count: 5000), at: 0)
        let now = try store.library.attributes(of: id)
        #expect(now.size == 5000)
        #expect(now.modificationTime > before)
        #expect(try store.library.lookup(album, Array("x".utf8)).size == 5000)
        try store.library.release(file)
    }

    @Test("a flush keeps the mark (the handle may write on); release commits and clears it")
    func markUntilRelease() throws {
        let store = try TestStore()
        let (id, file) = try openDirect(store)
        writeBehind(file, [UInt8](repeating: 2, count: 300), at: 0)
        try store.library.flush(file)
        #expect(try markedIDs(store) == [id])
        writeBehind(file, [UInt8](repeating: 3, count: 100), at: 300)
        try store.library.release(file)
        #expect(try markedIDs(store).isEmpty)
        let reopened = try store.reopen().attributes(of: id)
        #expect(reopened.size == 400)
    }

    @Test("after a crash before release, recovery takes size and mtime from the data")
    func recovery() throws {
        let store = try TestStore()
        let (id, file) = try openDirect(store)
        let created = try store.library.attributes(of: id).modificationTime
        usleep(20_000)
        writeBehind(file, [UInt8](repeating: 4, count: 7777), at: 0)
        try store.library.flush(file)
        // A crash: the library goes without a release.
        let recovered = try store.reopen().attributes(of: id)
        #expect(recovered.size == 7777)
        #expect(recovered.modificationTime > created)
        #expect(try markedIDs(store).isEmpty)
    }

    @Test("an explicit mtime set after the last write is what stays")
    func explicitTimeWins() throws {
        let store = try TestStore()
        let (id, file) = try openDirect(store)
        writeBehind(file, [UInt8](repeating: 5, count: 10), at: 0)
        _ = try store.library.setAttributes(id, AttributeChanges(modificationTime: .set(1_000)))
        #expect(try store.library.attributes(of: id).modificationTime == 1_000)
        try store.library.flush(file)
        try store.library.release(file)
        let a = try store.reopen().attributes(of: id)
        #expect(a.modificationTime == 1_000)
        #expect(a.size == 10)
    }

    @Test("a side file's mtime set after its last write stays, also once renamed to an asset before or after release (rsync, albumfs import)")
    func explicitTimeOfSideFileWins() throws {
        let store = try TestStore()
        for releaseFirst in [false, true] {
            let (id, file) = try openDirect(store, named: ".x.tmp")
            writeBehind(file, [UInt8](repeating: 5, count: 10), at: 0)
            _ = try store.library.setAttributes(id, AttributeChanges(modificationTime: .set(1_000)))
            try store.library.flush(file)
            if releaseFirst { try store.library.release(file) }
            _ = try store.library.rename(TestStore.roll, Array(".x.tmp".utf8), to: TestStore.roll, Array("x-\(releaseFirst).jpg".utf8))
            if !releaseFirst { try store.library.release(file) }
            #expect(try store.library.attributes(of: id).modificationTime == 1_000, "release first: \(releaseFirst)")
            #expect(try store.library.attributes(of: id).size == 10)
        }
    }

    @Test("after a crash, an mtime set after the last write (cp -p) is kept; the size comes from the data")
    func crashKeepsExplicitTime() throws {
        let store = try TestStore()
        let (id, file) = try openDirect(store)
        writeBehind(file, [UInt8](repeating: 6, count: 4321), at: 0)
        _ = try store.library.setAttributes(id, AttributeChanges(modificationTime: .set(946_684_800_000_000_000)))
        let recovered = try store.reopen().attributes(of: id)
        #expect(recovered.modificationTime == 946_684_800_000_000_000)
        #expect(recovered.size == 4321)
    }
}
