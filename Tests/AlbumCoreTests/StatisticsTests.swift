import Testing
@testable import AlbumCore

/// `albumfs stats`: what a store holds, read from its database.
@Suite("Store statistics")
struct StatisticsTests {
    @Test("assets, bytes, albums, Recently Deleted and side files are counted apart")
    func counts() throws {
        let store = try TestStore()
        let a = try store.makeAlbum("A")
        try store.makeAlbum(a, "B")
        try store.createFile(a, "one.jpg", contents: bytes("12345"))
        try store.createFile(TestStore.roll, "two.jpg", contents: bytes("123"))
        try store.createFile(TestStore.roll, "gone.jpg", contents: bytes("1234567"))
        try store.createFile(a, ".DS_Store", contents: bytes("ds"))
        try store.unlink(TestStore.roll, "gone.jpg")
        let s = try StoreStatistics.read(store.location)
        #expect(s == StoreStatistics(assets: 2, bytes: 8, albums: 2, deletedAssets: 1, deletedBytes: 7,
                                     sideFiles: 1, unread: 2, schemaVersion: Schema.migrator.latestVersion, localBytes: 15),
                "no facts reader: both live assets are not read yet")
        #expect(!StoreLock.isHeld(store.location))
        let lock = try StoreLock(location: store.location)
        #expect(StoreLock.isHeld(store.location))
        withExtendedLifetime(lock) {}
    }
}

@Suite("Store statistics by kind")
struct KindStatisticsTests {
    @Test("live assets by kind as far as read, the rest not read yet, favorites")
    func kinds() throws {
        let store = try TestStore(options: LibraryOptions(factsReader: LineFactsReader()))
        let video = try store.createFile(TestStore.roll, "a.mov", contents: bytes("kind=video"))
        try store.createFile(TestStore.roll, "b.jpg", contents: bytes("kind=photo"))
        try store.createFile(TestStore.roll, "c.jpg", contents: bytes("kind=photo\nc"))
        try store.createFile(TestStore.roll, "gone.jpg", contents: bytes("kind=photo\ngone"))
        #expect(store.library.waitForIndexing(timeout: 10))
        try store.unlink(TestStore.roll, "gone.jpg")
        _ = try store.library.link(video, into: FixedNode.favorites, named: name("a.mov"))
        let s = try StoreStatistics.read(store.location)
        #expect(s.kinds == ["photo": 2, "video": 1])
        #expect(s.unread == 0 && s.favorites == 1 && s.assets == 3)
    }
}
