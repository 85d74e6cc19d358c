import Dispatch
import Testing
@testable import AlbumCore

/// The end of a mount: once `stopIndexing` returns, the store may be
/// released, so no facts may be written after it, even by a read that was
/// still under way (a huge file, a slow disk) when the wait ran out.
@Suite("The indexer's stop: nothing is written after it")
struct IndexerStopTests {
    /// Reads like LineFactsReader, once `gate` opens; says when a read began.
    private struct GatedReader: AssetFactsReader {
        let began = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        func facts(ofFileAt descriptor: Int32) throws -> AssetFacts {
            began.signal()
            gate.wait()
            return try LineFactsReader().facts(ofFileAt: descriptor)
        }
        func sha256(ofFileAt descriptor: Int32) throws -> String { try LineFactsReader().sha256(ofFileAt: descriptor) }
    }

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
