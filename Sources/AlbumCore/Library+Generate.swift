#if canImport(Glibc)
import Glibc
#endif

/// Stores made for benchmarks and scale tests (`albumfs make-store`, a
/// hidden command): through the library's own queries, never by writing its
/// schema from outside.
extension Library {
    /// `count` assets in the roll, `IMG_0000000.JPG` on, each with a sparse
    /// content file of `size` bytes and one modification time a minute
    /// apart back from now; with `albumName`, an album under Albums/ holding
    /// the first `albumSize` of them under the same names. One transaction,
    /// into a library with no assets or albums yet. Returns the assets' ids.
    ///
    /// With `remoteOnly`, the store's remote is that one and every asset is
    /// as if uploaded and evicted (SEMANTICS.md § Remote storage): its object
    /// recorded (all are `size` zero bytes: one object, which nothing puts in
    /// the bucket) and no content file. For measuring a library whose
    /// originals are in a bucket; reading one needs that object there.
    public func generateAssets(count: Int, size: Int64, albumName: Name?, albumSize: Int, remoteOnly: RemoteConfiguration? = nil,
                               by caller: Caller) throws(LibraryError) -> ClosedRange<NodeID>? {
        guard count >= 0, size >= 0, albumSize >= 0, albumSize <= count else { throw .invalidArgument }
        let content = self.content
        let now = options.now()
        let zeros = try remoteOnly.map { _ throws(LibraryError) in try Self.digestOfZeros(size) }
        return try write { db -> ClosedRange<NodeID>? in
            if try db.hasAssetsOrAlbums() { throw LibraryError.exists }
            if let remoteOnly { try db.setRemoteConfiguration(remoteOnly) }
            var ids: [NodeID] = []
            ids.reserveCapacity(count)
            for i in 0..<count {
                let modified = now - Nanoseconds(count - i) * 60_000_000_000
                let id = try db.insertNode(kind: .asset, parent: nil, mode: 0o644, owner: caller, now: modified)
                try db.writeContentState(id, size: size, modified: modified, changed: now)
                try db.insertEntry(FixedNode.cameraRoll, Self.generatedName(i), id)
                if let zeros {
                    // No ETag: nothing was uploaded (fsck --remote checks the size).
                    try db.setRemoteObject(id, zeros, etag: nil, modified: modified)
                    try db.markEvicted(id)
                } else {
                    try content.create(id, sparseSize: size, modified: modified)
                }
                ids.append(id)
            }
            try db.touchDirectory(FixedNode.cameraRoll, now: now)
            if let albumName {
                let album = try db.insertNode(kind: .album, parent: FixedNode.albumsRoot, mode: 0o755, owner: caller, now: now)
                try db.insertEntry(FixedNode.albumsRoot, albumName, album)
                for (i, id) in ids.prefix(albumSize).enumerated() { try db.insertEntry(album, Self.generatedName(i), id) }
                try db.touchDirectory(FixedNode.albumsRoot, now: now)
            }
            guard let first = ids.first, let last = ids.last else { return nil }
            return first...last
        }
    }

    /// The digests of `size` zero bytes (a sparse scratch file, gone after).
    private static func digestOfZeros(_ size: Int64) throws(LibraryError) -> ObjectDigest {
        var template = Array("/tmp/albumfs-zeros-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw LibraryError(errno: errno) }
        defer { close(fd) }
        template.withUnsafeBufferPointer { _ = Glibc.unlink($0.baseAddress!) }
        guard ftruncate(fd, off_t(size)) == 0 else { throw LibraryError(errno: errno) }
        return try ObjectDigest.of(fd, length: size)
    }

    /// Forgets every asset's facts: the next mount reads them all again.
    public func forgetAllFacts() throws(LibraryError) {
        try write { db in try db.forgetAllFacts() }
    }

    private static func generatedName(_ i: Int) -> Name {
        let digits = String(i)
        return Array(("IMG_" + String(repeating: "0", count: max(0, 7 - digits.count)) + digits + ".JPG").utf8)
    }
}
