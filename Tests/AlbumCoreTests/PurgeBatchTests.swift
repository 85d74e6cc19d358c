#if canImport(Glibc)
import Glibc
#endif
import SQLiteKit
import Testing
@testable import AlbumCore

private let roll = TestStore.roll
private let recentlyDeleted = FixedNode.recentlyDeleted

private func count(_ store: TestStore, _ rows: String) throws -> Int64 {
    try store.library.read { db in try db.scalarInt("SELECT count(*) FROM \(rows)") }
}

private func names(_ store: TestStore, _ directory: NodeID) throws -> [String] {
    try store.library.list(directory, after: 0, limit: 1_000).map { String(decoding: $0.name, as: UTF8.self) }.sorted()
}

/// SEMANTICS.md § Recently Deleted, and the file manager's trash: a purge
/// frees the asset's storage at once; its node goes in its transaction, its
/// facts with its pending purge, a batch (Library.purgeBatch) at a time.
@Suite("A purge's facts go with its pending purge, in batches")
struct PurgeBatchTests {
    @Test("until its purge is done, a purged asset's facts are in no view, no statistic and no fsck --verify")
    func pendingFactsAreInvisible() throws {
        let store = try indexedStore()
        let gone = try store.createFile(roll, "gone.mov", contents: bytes("kind=video\ncid=P"))
        let photo = try store.createFile(roll, "pair.jpg", contents: bytes("kind=photo\ncid=P"))
        let kept = try store.createFile(roll, "kept.mov", contents: bytes("kind=video\nkept"))
        settled(store)
        #expect(try names(store, FixedNode.livePhotos) == ["pair.jpg"], "a pair shows once, by its still")
        // Two assets again, so that the video goes alone (SEMANTICS.md § Pairs).
        try store.library.unpair(photo)
        try store.unlink(roll, "gone.mov")
        try store.unlink(recentlyDeleted, "gone.mov")
        store.library.waitForFreedData()
        try store.makeAlbum("A")  // a later change: the batch is not full
        #expect(!store.exists(gone))
        #expect(store.dataSize(of: gone) == nil, "its storage is freed at once")
        #expect(try count(store, "asset_facts WHERE asset = \(gone)") == 1)
        #expect(try count(store, "pending_purges WHERE id = \(gone)") == 1)

        #expect(try names(store, FixedNode.livePhotos).isEmpty, "pair.jpg's pair is gone")
        #expect(try names(store, FixedNode.videos) == ["kept.mov"])
        #expect(try store.library.extendedAttribute(photo, Array("user.albumfs.kind".utf8)) == bytes("photo"))
        #expect(try store.id(roll, "kept.mov") == kept)
        store.close()
        let statistics = try StoreStatistics.read(store.location)
        #expect(statistics.kinds == ["video": 1, "photo": 1])
        #expect(statistics.unread == 0)
        #expect(try ContentVerifier(location: store.location, reader: LineFactsReader()).verify().isEmpty)
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
    }

    @Test("once a batch of purges has its data freed, the next change does them all: facts and pending rows go")
    func aBatchIsDoneInOneChange() throws {
        let store = try indexedStore(trashDays: 0)
        let batch = Library.purgeBatch
        let ids = try (0..<batch).map { try store.createFile(roll, "f\($0).jpg", contents: bytes("kind=photo\n\($0)")) }
        settled(store)
        for i in 0..<batch { try store.unlink(roll, "f\(i).jpg") }
        store.library.waitForFreedData()
        #expect(try count(store, "asset_facts") == Int64(batch), "no change since the last free: none is done yet")
        #expect(try count(store, "pending_purges") == Int64(batch))
        #expect(try count(store, "nodes WHERE id IN (\(ids.map(String.init).joined(separator: ",")))") == 0)
        try store.makeAlbum("A")
        #expect(try count(store, "asset_facts") == 0)
        #expect(try count(store, "pending_purges") == 0)
    }

    @Test("the next open does the purges an unmount (or a crash) left pending")
    func openFinishesPendingPurges() throws {
        let store = try indexedStore(trashDays: 0)
        let id = try store.createFile(roll, "x.jpg", contents: bytes("kind=photo\nx"))
        settled(store)
        try store.unlink(roll, "x.jpg")
        store.close()
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
        _ = try store.reopen()
        #expect(try count(store, "asset_facts WHERE asset = \(id)") == 0)
        #expect(try count(store, "pending_purges") == 0)
    }

    @Test("fsck reports facts whose asset does not exist and has no pending purge, and --repair removes them")
    func fsckFindsOrphanedFacts() throws {
        let store = try indexedStore()
        let id = try store.createFile(roll, "x.jpg", contents: bytes("kind=photo\nx"))
        settled(store)
        store.close()
        let db = try Database(path: store.location.databasePath)
        try db.execute("""
            INSERT INTO asset_facts(asset, sha256, kind, month, screenshot, raw, data_size, data_mtime)
            SELECT 999999, sha256, kind, month, 0, 0, 1, 1 FROM asset_facts WHERE asset = \(id)
            """)
        let checker = StoreChecker(location: store.location)
        let found = try checker.check(repair: false)
        #expect(found.map(\.description) == ["facts of asset 999999, which does not exist"])
        #expect(try checker.check(repair: true).count == 1)
        #expect(try checker.check(repair: false).isEmpty)
        #expect(try db.scalarInt("SELECT count(*) FROM asset_facts") == 1)
    }

    @Test("the migration keeps every fact and lets an asset's node go before its facts")
    func migrationFromTheForeignKey() throws {
        let store = try indexedStore()
        let id = try store.createFile(roll, "x.mov", contents: bytes("kind=video\nx"))
        settled(store)
        store.close()
        // The store as the previous format had it: asset_facts with its foreign key.
        let db = try Database(path: store.location.databasePath)
        // The format before that step (the steps after it are undone too).
        let step = try #require(Schema.migrator.migrations.firstIndex { $0.name.hasPrefix("a purged asset's facts") })
        try db.execute("""
            DROP TABLE remote; DROP TABLE upload_queue; DROP TABLE remote_objects; DROP TABLE remote_deletes;
            DROP TABLE evicted; DROP TABLE kept_local; DROP TABLE remote_status; DROP TABLE uploads_under_way;
            DROP TABLE thumbnails; DROP TABLE snapshot_status; DROP TABLE companion_deletes;
            DROP TABLE originals; DROP TABLE asset_identifiers; DROP TABLE pairs;
            DELETE FROM entries WHERE child = \(FixedNode.hidden); DELETE FROM nodes WHERE id = \(FixedNode.hidden)
            """)
        // (The thumbnails-in-the-bucket step only changed remote_objects, dropped above.)
        #expect(step + 9 == Schema.migrator.latestVersion, "a step after the thumbnails-in-the-bucket one: undo it here too")
        let version = step + 1
        try db.execute("""
            ALTER TABLE asset_facts RENAME TO facts_now;
            CREATE TABLE asset_facts(asset INTEGER PRIMARY KEY REFERENCES nodes(id), sha256 TEXT NOT NULL, type TEXT,
                kind TEXT NOT NULL, captured TEXT, month TEXT NOT NULL, width INTEGER, height INTEGER, duration REAL,
                location TEXT, content_id TEXT, screenshot INTEGER NOT NULL, raw INTEGER NOT NULL,
                data_size INTEGER NOT NULL, data_mtime INTEGER NOT NULL);
            INSERT INTO asset_facts SELECT * FROM facts_now;
            DROP TABLE facts_now;
            PRAGMA user_version = \(version - 1);
            """)
        _ = try store.reopen(options: LibraryOptions(trashDays: 0, factsReader: LineFactsReader()))
        #expect(try store.library.extendedAttribute(id, Array("user.albumfs.kind".utf8)) == bytes("video"))
        #expect(try names(store, FixedNode.videos) == ["x.mov"])
        try store.unlink(roll, "x.mov")
        #expect(!store.exists(id))
        store.close()
        #expect(try StoreChecker(location: store.location).check(repair: false).isEmpty)
    }
}
