#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization
import Testing
@testable import AlbumCore

/// Reads like LineFactsReader and notes the order of what it read (each
/// file's contents); the first read waits for `gate`.
final class OrderedReader: AssetFactsReader, Sendable {
    let began = DispatchSemaphore(value: 0)
    let gate = DispatchSemaphore(value: 0)
    private let readSoFar = Mutex<[String]>([])
    var order: [String] { readSoFar.withLock { $0 } }

    func facts(ofFileAt descriptor: Int32) throws -> AssetFacts {
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = pread(descriptor, &buffer, buffer.count, 0)
        let first = readSoFar.withLock { read in
            read.append(String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self))
            return read.count == 1
        }
        if first {
            began.signal()
            gate.wait()
        }
        return try LineFactsReader().facts(ofFileAt: descriptor)
    }
    func sha256(ofFileAt descriptor: Int32) throws -> String { try LineFactsReader().sha256(ofFileAt: descriptor) }
}

/// SEMANTICS.md § What albumfs knows of each asset: at mount, every asset
/// with no facts is read (the backlog). A library of millions must not hold
/// its backlog in memory, nor make a photo copied in wait behind all of it.
@Suite("The indexer's backlog at mount: read from the database a batch at a time")
struct IndexerBacklogTests {

    @Test("a photo closed while a backlog of 200 is read is read within a batch or two, not after the backlog")
    func closedPhotoGoesFirst() throws {
        let store = try TestStore()
        for i in 0..<200 { try store.createFile(TestStore.roll, "old \(i).jpg", contents: bytes("kind=photo\nold=\(i)")) }
        let reader = OrderedReader()
        try store.reopen(options: LibraryOptions(factsReader: reader))
        #expect(reader.began.wait(timeout: .now() + 10) == .success, "the backlog's first read did not start within 10 s")
        let new = try store.createFile(TestStore.roll, "new.jpg", contents: bytes("kind=video\nnew"))
        reader.gate.signal()
        settled(store)
        let order = reader.order
        let position = try #require(order.firstIndex(of: "kind=video\nnew"), "the new photo was never read")
        #expect(position <= 64, "the new photo was read at \(position) of \(order.count): behind the backlog")
        #expect(Set(order).count == 201, "read \(Set(order).count) distinct files of 201")
        #expect(try store.library.read { db in try db.facts(of: new) }?.kind == .video)
    }

    @Test("the backlog is read across gaps in the ids wider than one query's range")
    func acrossGaps() throws {
        let store = try TestStore()
        let before = try store.createFile(TestStore.roll, "before.jpg", contents: bytes("kind=photo\nbefore"))
        // Ids given up to far beyond one range of the backlog's query (a library
        // whose early imports were deleted and purged).
        try store.library.write { db in try db.execute("UPDATE sqlite_sequence SET seq = seq + 20000 WHERE name = 'nodes'") }
        let after = try store.createFile(TestStore.roll, "after.jpg", contents: bytes("kind=video\nafter"))
        #expect(after > before + 20000)
        try store.reopen(options: LibraryOptions(factsReader: LineFactsReader()))
        settled(store)
        #expect(try store.library.read { db in try db.facts(of: before) }?.kind == .photo)
        #expect(try store.library.read { db in try db.facts(of: after) }?.kind == .video, "the asset beyond the gap was never read")
    }
}
