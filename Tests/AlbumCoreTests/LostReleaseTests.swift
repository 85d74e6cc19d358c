#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import AlbumCore

/// A RELEASE the daemon never serves. `close()` returns before the kernel's
/// RELEASE reaches the daemon, and an unmount right after it (`cp … &&
/// fusermount3 -u`) ends the connection with the RELEASE still queued; so
/// does a crash. The next mount then finds the asset marked as being
/// written and takes its state from the data (SEMANTICS.md § Durability and safety).
/// What it takes must be exactly what the last `stat` showed: the size and
/// the mtime (rsync compares both), whatever came last — a write, an explicit
/// mtime, a truncate, or nothing at all.
@Suite("A release that never comes: the next mount shows what stat showed")
struct LostReleaseTests {
    /// How the handle's writes reach the data: through the daemon
    /// (`Library.write`) or behind its back (FUSE passthrough: pwrite on the
    /// handle's content descriptor, as the kernel does).
    enum Path: String, CaseIterable, CustomTestStringConvertible {
        case daemon, passthrough
        var testDescription: String { rawValue }
    }

    private func open(_ store: TestStore, _ id: NodeID, _ path: Path) throws -> OpenFile {
        let file = try store.library.open(id, writable: true, truncate: false)
        if path == .passthrough { store.library.writesBypassDaemon(file) }
        return file
    }

    private func write(_ store: TestStore, _ file: OpenFile, _ path: Path, _ count: Int, at offset: Int64) throws {
        let data = [UInt8](repeating: 7, count: count)
        let written = try data.withUnsafeBytes { raw -> Int in
            switch path {
            case .daemon: return try store.library.write(file, from: raw.baseAddress!, count: count, at: offset)
            case .passthrough: return pwrite(file.descriptor, raw.baseAddress!, count, off_t(offset))
            }
        }
        #expect(written == count)
    }

    /// A new store with `a.jpg` in the roll, open for writing by `path`.
    private func openNew(_ path: Path, options: LibraryOptions = LibraryOptions()) throws -> (TestStore, NodeID, OpenFile) {
        let store = try TestStore(options: options)
        let id = try store.createFile(TestStore.roll, "a.jpg")
        return (store, id, try open(store, id, path))
    }

    /// The library goes without the release (the file's handle is left as a
    /// lost RELEASE leaves it), and a new one opens the store.
    private func expectSameAfterLostRelease(_ store: TestStore, _ id: NodeID, _ file: OpenFile,
                                            sourceLocation: SourceLocation = #_sourceLocation) throws {
        let shown = try store.library.attributes(of: id)
        let recovered = try store.reopen().attributes(of: id)
        close(file.descriptor)
        #expect(recovered.size == shown.size, sourceLocation: sourceLocation)
        #expect(recovered.modificationTime == shown.modificationTime, sourceLocation: sourceLocation)
        #expect(recovered.changeTime == shown.changeTime, sourceLocation: sourceLocation)
    }

    @Test("writes, then close", arguments: Path.allCases)
    func afterWrites(_ path: Path) throws {
        let (store, id, file) = try openNew(path)
        try write(store, file, path, 5000, at: 0)
        try write(store, file, path, 3000, at: 5000)
        try expectSameAfterLostRelease(store, id, file)
    }

    @Test("a write right after an explicit mtime (the mtime moves on with it)", arguments: Path.allCases)
    func writeAfterExplicitTime(_ path: Path) throws {
        let (store, id, file) = try openNew(path)
        try write(store, file, path, 5000, at: 0)
        _ = try store.library.setAttributes(id, AttributeChanges(modificationTime: .set(1_000_000_000)))
        try write(store, file, path, 3000, at: 5000)
        #expect(try store.library.attributes(of: id).modificationTime > 1_000_000_000)
        try expectSameAfterLostRelease(store, id, file)
    }

    @Test("an explicit mtime after the last write (cp -p, rsync)", arguments: Path.allCases)
    func explicitTimeAfterWrites(_ path: Path) throws {
        let (store, id, file) = try openNew(path)
        try write(store, file, path, 4321, at: 0)
        _ = try store.library.setAttributes(id, AttributeChanges(modificationTime: .set(946_684_800_000_000_000)))
        try expectSameAfterLostRelease(store, id, file)
    }

    @Test("opened for writing, nothing written, in a store whose data does not carry the mtime yet: it stays", arguments: Path.allCases)
    func openedOnly(_ path: Path) throws {
        let store = try TestStore()
        let id = try store.createFile(TestStore.roll, "a.jpg", contents: [UInt8](repeating: 1, count: 100))
        _ = try store.library.setAttributes(id, AttributeChanges(modificationTime: .set(946_684_800_000_000_000)))
        // A store made before the data carried the mtime: the data has another.
        var times = [timespec(tv_sec: 1_700_000_000, tv_nsec: 0), timespec(tv_sec: 1_700_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, store.library.content.path(of: id), &times, 0) == 0)
        let file = try open(store, id, path)
        try expectSameAfterLostRelease(store, id, file)
    }

    @Test("a truncate of an open file", arguments: Path.allCases)
    func truncated(_ path: Path) throws {
        let (store, id, file) = try openNew(path)
        try write(store, file, path, 9000, at: 0)
        _ = try store.library.setAttributes(id, AttributeChanges(size: 100))
        try expectSameAfterLostRelease(store, id, file)
    }

    @Test("a new file, nothing written (touch)")
    func createdOnly() throws {
        let store = try TestStore()
        let (attributes, _) = try store.library.createAsset(in: TestStore.roll, named: Array("new.jpg".utf8), mode: 0o644, by: TestStore.owner)
        let file = try store.library.openCreated(attributes)
        try expectSameAfterLostRelease(store, attributes.id, file)
    }

    @Test("a write after a setattr never seems to come first, though the kernel's clock lags the daemon's", arguments: Path.allCases)
    func writeAfterSetattrOfALaterClock(_ path: Path) throws {
        // The kernel stamps writes with its coarse clock, up to a tick behind
        // the daemon's; a store clock 10 s ahead makes that lag certain.
        let (store, id, file) = try openNew(path, options: LibraryOptions(clockOffset: 10_000_000_000))
        let set = try store.library.setAttributes(id, AttributeChanges(modificationTime: .set(1_000_000_000)))
        try write(store, file, path, 3000, at: 0)
        let written = try store.library.attributes(of: id)
        #expect(written.modificationTime >= set.changeTime)
        #expect(written.changeTime >= set.changeTime)
        try expectSameAfterLostRelease(store, id, file)
    }

    @Test("a preallocation that grows the file (posix_fallocate)")
    func allocated() throws {
        let (store, id, file) = try openNew(.daemon)
        try store.library.allocate(file, mode: 0, offset: 0, length: 1 << 20)
        try expectSameAfterLostRelease(store, id, file)
    }
}
