#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import Testing
@testable import AlbumCore

private let roll = TestStore.roll

/// A flag tests set from a pause point.
private final class Flag: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    func set(_ newValue: Bool = true) { value.withLock { $0 = newValue } }
    /// Sets it; returns whether it was set before.
    func testAndSet() -> Bool { value.withLock { old in defer { old = true }; return old } }
}

/// Runs `body` once, at the first time `point` is reached (with no lock held).
private func once(at point: PausePoint, in library: Library, _ body: @escaping @Sendable () throws -> Void) -> Flag {
    let fired = Flag()
    library.pausePoints.install { reached throws(LibraryError) in
        guard reached == point, !fired.testAndSet() else { return }
        do { try body() } catch let error as LibraryError { throw error } catch { throw .io(EIO) }
    }
    return fired
}

private func isMarked(_ library: Library, _ id: NodeID) throws -> Bool {
    try library.read { db in try db.unfinishedWrites() }.contains(id)
}

private func writeBytes(_ library: Library, _ file: OpenFile, _ count: Int, at offset: Int64 = 0) throws {
    let data = [UInt8](repeating: 0x61, count: count)
    _ = try data.withUnsafeBytes { try library.write(file, from: $0.baseAddress!, count: count, at: offset) }
}

/// The four races of the "No surprises" issue, each made to happen at its exact moment
/// through a pause point (SEMANTICS.md § Durability and safety: the row never promises bytes the
/// data does not have, and a crash leaves a store the next mount makes whole).
@Suite("Races: the interleavings that used to break the write protocol")
struct RaceTests {
    @Test("a last release between a truncate's commit and its cut neither undoes the new size nor drops the mark")
    func truncateAgainstLastRelease() throws {
        let store = try TestStore()
        let library = store.library
        let id = try store.createFile(roll, "x")
        let file = try library.open(id, writable: true, truncate: false)
        try writeBytes(library, file, 100)
        let markedDuringCut = Flag()
        let fired = once(at: .setAttributesBeforeCut, in: library) {
            try library.release(file)
            markedDuringCut.set(try isMarked(library, id))
        }
        _ = try library.setAttributes(id, AttributeChanges(size: 0))
        #expect(fired.isSet)
        #expect(markedDuringCut.isSet, "a crash before the cut would leave a row the data does not match, unmarked")
        #expect(try library.attributes(of: id).size == 0)
        #expect(library.content.size(of: id) == 0)
        #expect(try !isMarked(library, id))
        store.close()
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
    }

    @Test("a last release while a new handle opens does not seed the new handle with the size from before it")
    func openAgainstLastRelease() throws {
        let store = try TestStore()
        let library = store.library
        let id = try store.createFile(roll, "x")
        let first = try library.open(id, writable: true, truncate: false)
        try writeBytes(library, first, 100)
        // The release comes after the open's first look at the asset (its
        // kind) and before the read that seeds the new handle.
        let fired = once(at: .openBeforeRegister, in: library) { try library.release(first) }
        let second = try library.open(id, writable: true, truncate: false)
        #expect(fired.isSet)
        #expect(try library.attributes(of: id).size == 100)
        try writeBytes(library, second, 1, at: 10)
        try library.release(second)
        #expect(try library.attributes(of: id).size == 100)
        store.close()
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
    }

    @Test("a flush between a write's mark check and its data keeps the mark: data is never ahead of an unmarked row")
    func writeAgainstFlush() throws {
        let store = try TestStore()
        let library = store.library
        let id = try store.createFile(roll, "x")
        let file = try library.open(id, writable: true, truncate: false)
        try writeBytes(library, file, 10)
        try library.flush(file)     // the mark goes with the only handle's flush
        let fired = once(at: .writeBeforeData, in: library) { try library.flush(file) }
        try writeBytes(library, file, 50, at: 10)
        #expect(fired.isSet)
        #expect(try isMarked(library, id), "the data (60 bytes) is ahead of the row (10) with no mark: a crash now loses the repair")
        try library.flush(file)
        try library.release(file)
        #expect(try library.attributes(of: id).size == 60)
    }

    @Test("a create whose commit fails leaves no content file behind, even when the id goes to an album next")
    func failedCreateLeavesNoData() throws {
        let store = try TestStore()
        let library = store.library
        library.pausePoints.install { point throws(LibraryError) in
            if point == .createBeforeCommit { throw .noSpace }
        }
        #expect(throws: LibraryError.noSpace) {
            try library.createAsset(in: roll, named: name("x"), mode: 0o644, by: TestStore.owner)
        }
        library.pausePoints.install(nil)
        _ = try store.makeAlbum("A")   // takes the id the failed create had
        store.close()
        let problems = try StoreChecker(location: store.location).check(repair: false)
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test("a create whose commit fails never removes the data of the create that is handed its id next")
    func failedCreateSparesTheNextCreatesData() throws {
        // SEMANTICS.md § Durability and safety: a rolled-back create's id (and
        // so its content file's name) is handed out again at once; its clean-up
        // must be over before anyone else can take them.
        let store = try TestStore()
        let library = store.library
        let failing = Flag()
        let next = Mutex<NodeID?>(nil)
        library.pausePoints.install { point throws(LibraryError) in
            switch point {
            case .createBeforeCommit where !failing.testAndSet():
                throw .noSpace
            case .changeRolledBack where next.withLock({ $0 }) == nil:
                let id = try library.createAsset(in: roll, named: name("y"), mode: 0o644, by: TestStore.owner).0.id
                next.withLock { $0 = id }
                let file = try library.open(id, writable: true, truncate: false)
                do { try writeBytes(library, file, 14) } catch { throw .io(EIO) }
                try library.release(file)
            default:
                break
            }
        }
        #expect(throws: LibraryError.noSpace) {
            try library.createAsset(in: roll, named: name("x"), mode: 0o644, by: TestStore.owner)
        }
        library.pausePoints.install(nil)
        let id = try #require(next.withLock { $0 })
        #expect(try store.id(roll, "x") == nil)
        #expect(try store.read(id) == [UInt8](repeating: 0x61, count: 14), "the failed create's clean-up removed the next create's data")
        store.close()
        let problems = try StoreChecker(location: store.location).check(repair: false)
        #expect(problems.isEmpty, "\(problems)")
    }
}
