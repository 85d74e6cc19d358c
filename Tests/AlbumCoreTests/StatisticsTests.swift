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
                                     sideFiles: 1, schemaVersion: Schema.migrator.latestVersion))
        #expect(!StoreLock.isHeld(store.location))
        let lock = try StoreLock(location: store.location)
        #expect(StoreLock.isHeld(store.location))
        withExtendedLifetime(lock) {}
    }
}
