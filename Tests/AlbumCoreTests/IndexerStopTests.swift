#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Testing
@testable import AlbumCore

/// Reads like LineFactsReader, once `gate` opens; says when a read began,
/// and what the file it holds has on disk once the gate opens.
final class GatedReader: AssetFactsReader, @unchecked Sendable {
    let began = DispatchSemaphore(value: 0)
    let gate = DispatchSemaphore(value: 0)
    /// st_blocks of the file being read, when the gate opened (under `lock`).
    private let lock = DispatchSemaphore(value: 1)
    private var blocks: Int?
    var blocksAtGate: Int? { lock.wait(); defer { lock.signal() }; return blocks }

    func facts(ofFileAt descriptor: Int32) throws -> AssetFacts {
        began.signal()
        gate.wait()
        var info = stat()
        if fstat(descriptor, &info) == 0 { lock.wait(); blocks = Int(info.st_blocks); lock.signal() }
        return try LineFactsReader().facts(ofFileAt: descriptor)
    }
    func sha256(ofFileAt descriptor: Int32) throws -> String { try LineFactsReader().sha256(ofFileAt: descriptor) }
}

/// The end of a mount: once `stopIndexing` returns, the store may be
/// released, so no facts may be written after it, even by a read that was
/// still under way (a huge file, a slow disk) when the wait ran out.
@Suite("The indexer's stop: nothing is written after it")
struct IndexerStopTests {

    @Test("a read still under way when the stop's wait runs out writes nothing")
    func lateReadWritesNothing() throws {
        let reader = GatedReader()
        let store = try TestStore(options: LibraryOptions(factsReader: reader))
        let library = store.library
        let id = try store.createFile(TestStore.roll, "x.jpg", contents: bytes("kind=photo"))
        #expect(reader.began.wait(timeout: .now() + 10) == .success, "the read did not start within 10 s")
        library.stopIndexing(timeout: 0.05)
        reader.gate.signal()
        #expect(library.waitForIndexing(timeout: 10))
        #expect(try library.read { db in try db.facts(of: id) } == nil, "facts were written after the indexer stopped")
    }
}

/// `df` right after a delete that purges (trash_days=0): the space is free
/// when the call returns, even while the facts reader still holds the file
/// (SEMANTICS.md § Recently Deleted: "its storage is freed at once").
@Suite("A purge frees its space at once")
struct PurgeFreesSpaceTests {
    @Test("a purged asset's blocks are free while a background read still holds its file")
    func freedUnderARead() throws {
        let reader = GatedReader()
        let store = try TestStore(options: LibraryOptions(trashDays: 0, factsReader: reader))
        _ = try store.createFile(TestStore.roll, "x.jpg", contents: [UInt8](repeating: 7, count: 1 << 20))
        #expect(reader.began.wait(timeout: .now() + 10) == .success, "the read did not start within 10 s")
        try store.unlink(TestStore.roll, "x.jpg")
        _ = try store.library.statistics()      // statfs: the frees run first
        reader.gate.signal()
        #expect(store.library.waitForIndexing(timeout: 10))
        #expect(reader.blocksAtGate == 0, "the purged data still takes \(reader.blocksAtGate ?? -1) blocks while the reader holds it")
    }
}
