#if canImport(Glibc)
import Glibc
#endif
import SQLiteKit

/// `albumfs fsck --remote`: the bucket against the library (SEMANTICS.md §
/// Remote storage). One HEAD per object the library records: there, of
/// the recorded size and (where recorded) ETag; then one listing of the
/// library's objects for those it does not know. `repair` only uploads what
/// a local copy can provide (checked against the object's name first); it
/// never deletes from the bucket. Run on a store no daemon holds, like fsck.
public struct RemoteChecker {
    public struct Report: Sendable {
        public var problems: [StoreChecker.Problem] = []
        /// What is fine but worth saying (uploads waiting, deletes owed).
        public var notes: [String] = []
        /// Objects looked at with a HEAD.
        public var checked = 0
    }

    public let location: StoreLocation
    public init(location: StoreLocation) { self.location = location }

    /// The store's remote (nil: it has none), to make the backend from.
    public func remote() throws(LibraryError) -> RemoteConfiguration? {
        do {
            return try Database(path: location.databasePath, mode: .readOnly).remoteConfiguration()
        } catch {
            throw .unusableStore("cannot read the store's database at \(location.databasePath): \(error)")
        }
    }

    /// `progress(done, total)` after each HEAD. A bucket that cannot be
    /// reached (or refuses the keys) throws: nothing is judged on it.
    public func check(_ backend: any ObjectBackend, repair: Bool,
                      progress: (Int, Int) -> Void = { _, _ in }) throws(LibraryError) -> Report {
        let lock: StoreLock?
        do {
            lock = try StoreLock(location: location)
        } catch {
            guard !repair, StoreLock.holderMode(location) == .readOnly else {
                throw .unusableStore("the store \(location.root) is mounted; unmount it first (a read-only mount can be checked without --repair)")
            }
            lock = nil
        }
        defer { withExtendedLifetime(lock) {} }
        do {
            let db = try Database(path: location.databasePath, mode: repair ? .readWrite : .readOnly)
            db.setBusyTimeout(milliseconds: 5_000)
            return try run(db, backend, repair: repair, progress: progress)
        } catch let error as LibraryError {
            throw error
        } catch let error as SQLiteError {
            throw .unusableStore("cannot read the store's database: \(error.message)")
        } catch {
            throw .remote("the bucket cannot be checked: \(error)")
        }
    }

    private func run(_ db: Database, _ backend: any ObjectBackend, repair: Bool,
                     progress: (Int, Int) -> Void) throws -> Report {
        var report = Report()
        let recorded = try db.recordedObjects()
        let evicted = Set(try db.evictedAssets())
        let content = ContentStore(directory: location.contentPath)
        for (index, object) in recorded.enumerated() {
            let found = try backend.head(sha256: object.sha256)
            report.checked += 1
            progress(index + 1, recorded.count)
            let what: String
            if let found {
                if found.size != object.size {
                    what = "has \(found.size) bytes, not \(object.size)"
                } else if let etag = object.etag, etag != found.etag {
                    what = "was overwritten behind albumfs's back (ETag \(found.etag), recorded \(etag))"
                } else {
                    continue
                }
            } else {
                what = "is missing"
            }
            let names = try object.assets.map { asset in try describe(asset, db) }.joined(separator: ", ")
            let description = "object \(object.sha256) of \(names) \(what)"
            // A local copy that is still that content can put it back.
            guard let source = object.assets.first(where: { asset in
                !evicted.contains(asset) && (try? localCopy(of: asset, is: object.sha256, content)) == true
            }) else {
                report.problems.append(StoreChecker.Problem(
                    description: description, repair: nil,
                    whyNotRepaired: "no local copy has this content: "
                        + (object.assets.allSatisfy(evicted.contains) ? "it was only in the bucket (restore the object from a copy of the bucket)"
                                                                       : "the local data changed since (it is uploaded again once queued)")))
                continue
            }
            let action = "upload it again from the local copy of asset \(source)"
            if repair {
                let descriptor = try content.open(source, writable: false)
                defer { close(descriptor) }
                // An overwritten object is replaced: the store keeps one that is there with the right size.
                if found != nil { try backend.remove(sha256: object.sha256) }
                let etag = try backend.store(descriptor, length: object.size, sha256: object.sha256)
                try db.transaction { try db.setRemoteETag(object.sha256, etag) }
            }
            report.problems.append(StoreChecker.Problem(description: description, repair: action))
        }
        // Objects the library does not know: listed, never deleted here.
        let known = Set(recorded.map(\.sha256))
        let owed = try db.pendingRemoteDeletes()
        let underWay = try db.objectsUnderWay()
        var waiting = 0, unrecorded = 0
        for object in try backend.objects() where !known.contains(object.sha256) {
            if owed.contains(object.sha256) { waiting += 1; continue }
            // Stored by an upload the mount ended (a crash) before it was recorded: its asset's
            // upload is still queued and finds it there, or its end owes it a delete.
            if underWay.contains(object.sha256) { unrecorded += 1; continue }
            report.problems.append(StoreChecker.Problem(
                description: "object \(object.sha256) (\(object.size) bytes) is in the bucket, and no asset of this library needs it",
                repair: nil,
                whyNotRepaired: "fsck never deletes from the bucket (another copy of the library, or a recovery, may need it): "
                    + "delete it with an S3 client if you are sure"))
        }
        if waiting > 0 { report.notes.append("\(waiting) object\(waiting == 1 ? "" : "s") no asset needs wait for their delete (done by the next mount)") }
        if unrecorded > 0 {
            report.notes.append("\(unrecorded) object\(unrecorded == 1 ? "" : "s") stored by an upload a crash cut short wait to be recorded (done by the next mount)")
        }
        let queued = try db.uploadsQueued()
        if queued > 0 { report.notes.append("\(queued) upload\(queued == 1 ? "" : "s") wait (done by the next mount)") }
        return report
    }

    /// "asset 12 (IMG_0001.JPG)", by its roll or Recently Deleted name.
    private func describe(_ asset: NodeID, _ db: Database) throws -> String {
        let name = try db.name(of: asset, in: FixedNode.cameraRoll) ?? db.name(of: asset, in: FixedNode.recentlyDeleted)
        return "asset \(asset)" + (name.map { " (\(String(decoding: $0, as: UTF8.self)))" } ?? "")
    }

    private func localCopy(of asset: NodeID, is sha256: String, _ content: ContentStore) throws -> Bool {
        let descriptor = try content.open(asset, writable: false)
        defer { close(descriptor) }
        guard let stamp = ContentStamp(descriptor: descriptor) else { return false }
        return try ObjectDigest.of(descriptor, length: stamp.size).sha256 == sha256
    }
}
