#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import AlbumCore
import Digests
import ObjectStore

/// SEMANTICS.md § Thumbnails, "In the bucket": the writer stores each
/// photo's thumbnail beside its original, records its SHA-256, stores it
/// anew when the picture changes, and deletes it with the object.
@Suite("Thumbnails in the bucket (SEMANTICS.md § Thumbnails)", .serialized,
       .enabled(if: gateway != nil, "needs RADOSGW_ENDPOINT and keys: scripts/test starts one"))
struct ThumbnailObjectsTests {
    static let thumbnailing = Array("user.albumfs.thumbnailing".utf8)

    /// Facts (of the asset's data as it is) with `png` as their thumbnail, as the facts worker records them.
    static func drawn(_ s: TestStore, _ id: NodeID, _ png: [UInt8]) throws {
        let data = try s.read(id)
        let attributes = try s.library.attributes(of: id)
        let facts = AssetFacts(sha256: SHA256.hex(SHA256.digest(data)), type: "image/jpeg", kind: .photo)
        try s.library.write { db in
            try db.setFacts(id, facts, month: "2026-12", screenshot: false, stamp: (attributes.size, attributes.modificationTime))
            try db.setThumbnail(id, png)
        }
    }

    @Test("stored after the upload, named by the object, its SHA-256 recorded; a new picture stored anew; deleted with its object")
    func storedAndDeleted() throws {
        let f = try RemoteFixture(trashDays: 0)
        let s = f.store
        let data = bytes("a photo's bytes")
        let id = try s.createFile(TestStore.roll, "IMG_1.JPG", contents: data)
        try f.start()
        try f.synced()
        let object = FileDigest.sha256(of: data)
        let key = ThumbnailObjects.key(of: object)
        #expect(try f.bucket.head(key) == nil, "a thumbnail stored before the facts made one")
        try Self.drawn(s, id, bytes("first picture"))
        eventually("the thumbnail stored") { try s.library.extendedAttribute(TestStore.root, Self.thumbnailing) == bytes("0") }
        #expect(try f.bucket.get(key) == bytes("first picture"))
        #expect(try s.library.read { db in try db.statement("SELECT thumbnail_sha256 FROM remote_objects WHERE asset = ?1").bind(.int(id)).first { $0.text(0) } }
                == SHA256.hex(SHA256.digest(bytes("first picture"))))
        try Self.drawn(s, id, bytes("second picture"))
        #expect(try s.library.extendedAttribute(TestStore.root, Self.thumbnailing) == bytes("1"))
        eventually("the new picture stored") { try f.bucket.get(key) == bytes("second picture") }
        _ = try s.library.unlink(TestStore.roll, name("IMG_1.JPG"))
        eventually("the object and its thumbnail deleted") {
            try f.bucket.head(S3ObjectBackend.key(of: object)) == nil && f.bucket.head(key) == nil
        }
        s.library.stopRemoteSync()
    }
}
