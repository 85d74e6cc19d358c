#if canImport(Glibc)
import Glibc
#endif
import SQLiteKit

/// A second device's view of a library (SEMANTICS.md § Surviving the
/// machine): `albumfs mount --remote s3://… -o ro` with no store of its own.
/// Its cache directory holds a store recovered from the bucket's newest
/// snapshot (and the uploads after it), rebuilt when the bucket has a newer
/// one; the mount is read-only in the kernel, and nothing is ever written to
/// the bucket: the originals read come into the cache, bounded by `cache_size`.
extension Library {
    /// Makes the store at `location` the bucket's newest state: kept when it
    /// was made from the newest snapshot, else rebuilt (its cached originals
    /// go with it). Returns the snapshot it holds (nil: none in the bucket).
    public static func prepareMirror(at location: StoreLocation, of remote: RemoteConfiguration, from backend: any ObjectBackend,
                                     owner: Caller, progress: (String) -> Void = { _ in }) throws -> String? {
        let newest = try newestSnapshot(in: backend)
        if location.holdsStore {
            if let held = location.readSmallFile(mirrorMarker), held == (newest ?? "") { return newest }
            progress("a newer snapshot: rebuilding the cache \(location.root)")
            try discardStore(at: location)
        }
        let (library, _) = try recover(from: backend, remote: remote, at: nil, into: location, owner: owner, progress: progress)
        withExtendedLifetime(library) {}
        try location.writeSmallFile(mirrorMarker, newest ?? "")
        return newest
    }

    /// The file in a second device's cache that names the snapshot it holds.
    private static let mirrorMarker = "mirror-of"

    private static func newestSnapshot(in backend: any ObjectBackend) throws -> String? {
        try backend.list(Snapshots.prefix).map(\.key).filter { Snapshots.time(of: $0) != nil }.max()
    }

    /// Removes the store at `location`: its data, its database, its space
    /// reserve and the mirror's marker (the directory stays).
    private static func discardStore(at location: StoreLocation) throws(LibraryError) {
        try ContentStore(directory: location.contentPath).removeEverything()
        for path in [location.databasePath, location.walPath, location.databasePath + "-shm", SpaceReserve(location: location).path,
                     location.root + "/" + mirrorMarker] {
            _ = Glibc.unlink(path)
        }
    }

    /// What `albumfs refresh` did.
    public enum Refresh: Sendable, Equatable {
        /// The mount already showed the bucket's newest snapshot.
        case unchanged(snapshot: String?)
        /// It shows `snapshot` now; `assets` of it changed.
        case refreshed(snapshot: String, assets: Int)

        public var description: String {
            switch self {
            case .unchanged(let snapshot): return "unchanged: \(snapshot ?? "no snapshot in the bucket")"
            case .refreshed(let snapshot, let assets): return "refreshed: \(snapshot) (\(assets) asset\(assets == 1 ? "" : "s") changed)"
            }
        }
    }

    /// A second device's mount takes the bucket's newest snapshot (and the
    /// uploads after it) while mounted (`albumfs refresh`): a store is
    /// recovered from it beside the cache, and the live database becomes
    /// that one in one step; what the kernel cached of the old rows is sent
    /// to `backgroundChanges` (names, listings, attributes).
    /// Cached originals whose object is unchanged stay; the others go. A
    /// download of an asset that changes is waited for first (it fetches the
    /// old object into the file a new one would use). One at a time.
    public func refreshMirror() throws(LibraryError) -> Refresh {
        guard let remote, let held = location.readSmallFile(Self.mirrorMarker) else {
            throw .notSupported   // not a second device's mount: its own store changes it
        }
        guard let backend = remoteSync.withLock({ $0 })?.backend else { throw .notSupported }
        return try refreshing.withLock { _ throws(LibraryError) -> Refresh in
            let newest: String?
            do { newest = try Self.newestSnapshot(in: backend) } catch { throw .remote("refresh: the bucket cannot be listed: \(error)") }
            guard let newest, newest != held else { return .unchanged(snapshot: newest ?? (held.isEmpty ? nil : held)) }
            let next = StoreLocation(path: location.root + "/refreshing")
            func removeNext() { try? Self.discardStore(at: next); _ = Glibc.rmdir(next.root) }
            removeNext()   // (a refresh a crash cut short)
            defer { removeNext() }
            let snapshot: String
            // As the mount's cache was made: owned as its root is, with this mount's clock and trash.
            guard let root = try read({ db in try db.attributes(of: FixedNode.root) }) else { throw .notFound }
            var recovery = LibraryOptions(trashDays: options.trashDays, clockOffset: options.clockOffset)
            recovery.log = options.log
            do {
                let (library, report) = try Self.recover(from: backend, remote: remote, at: nil, into: next,
                                                         owner: Caller(uid: root.uid, gid: root.gid), options: recovery)
                withExtendedLifetime(library) {}
                snapshot = report.snapshot ?? newest
            } catch let error as LibraryError {
                throw error
            } catch {
                throw .remote("refresh: the snapshot \(newest) cannot be had: \(error)")
            }
            let assets = try takeDatabase(of: next)
            try location.writeSmallFile(Self.mirrorMarker, newest)
            return .refreshed(snapshot: snapshot, assets: assets)
        }
    }

    /// The live database becomes the store at `next`'s (see
    /// refreshMirror); returns how many assets changed. What changes is
    /// found first on connections of its own, with no lock held (the mount
    /// serves on: at 1,000,000 assets this is seconds); under the database
    /// lock only the pages are copied (SQLite's backup) and the cached
    /// originals sorted. A download of a changed asset is waited for first
    /// (at most three times, each for as long as the download's own
    /// timeout); one still under way then fails the refresh.
    private func takeDatabase(of next: StoreLocation) throws(LibraryError) -> Int {
        let (changes, touched, assets) = try changes(to: next)
        try pausePoints.reached(.refreshCompared)
        for _ in 0..<3 {
            let (content, openFiles) = (self.content, self.openFiles)
            let swapped = try locked { db, _ -> Bool in
                guard !downloads.withLock({ running in touched.contains { running[$0] != nil } }) else { return false }
                let cached = try db.cachedOriginals()
                try db.replaceContents(withDatabaseAt: next.databasePath)
                // The originals here stay local where the new snapshot records the same
                // object; the others go, in this lock hold (no download installs a
                // new copy before). The commit also moves the change count on.
                let stale = try db.transaction { () throws -> [NodeID] in
                    var stale: [NodeID] = []
                    for (asset, sha256) in cached {
                        if try db.remoteObject(of: asset)?.digest.sha256 == sha256 { try db.unmarkEvicted(asset) } else { stale.append(asset) }
                    }
                    return stale
                }
                for id in stale { content.remove(id, emptyingFirst: !openFiles.isOpen(id)) }
                return true
            }
            if swapped {
                if !changes.isEmpty { backgroundChanges.withLock { $0?(changes) } }
                return assets
            }
            let running = downloads.withLock { Array($0.values) }
            try pausePoints.reached(.refreshWaitingForDownload)
            for download in running { download.waitForEnd() }
        }
        throw .unavailable("refresh: originals that changed are being fetched; refresh again once they are read")
    }

    /// What the kernel may hold that the store at `next` changes (names, listings,
    /// attributes, the views' names of each asset concerned), and the assets
    /// concerned; the thumbnails still right go into `next`. On connections of
    /// their own (the live database only read).
    private func changes(to next: StoreLocation) throws(LibraryError) -> (changes: ChangeSet, touched: Set<NodeID>, assets: Int) {
        try mappingErrors {
            var changes: ChangeSet, touched: Set<NodeID>, wereAssets: Set<NodeID>
            do {
                let live = try Database(path: location.databasePath, mode: .readWrite)
                live.setBusyTimeout(milliseconds: 10_000)
                try live.attachNext(next.databasePath)
                defer { try? live.detachNext() }
                guard try live.nextHasSameSchema() else {
                    throw LibraryError.unusableStore("the bucket's newest snapshot is of another version of albumfs: remount to see it")
                }
                (changes, touched) = try live.refreshChanges()
                wereAssets = try Self.viewNames(of: touched, in: live, into: &changes, entries: true)
                try live.keepThumbnailsInNext()
            }
            let nextDatabase = try Database(path: next.databasePath, mode: .readOnly)
            let areAssets = try Self.viewNames(of: touched, in: nextDatabase, into: &changes, entries: false)
            return (changes, touched, wereAssets.union(areAssets).count)
        }
    }

    /// The names the views show of each asset of `touched` in `db`: their
    /// listings (and, for the old rows, `entries`: the names themselves).
    /// Returns which of `touched` are assets there.
    private static func viewNames(of touched: Set<NodeID>, in db: Database, into changes: inout ChangeSet, entries: Bool) throws -> Set<NodeID> {
        var assets = Set<NodeID>()
        for id in touched where try db.kind(of: id) == .asset {
            assets.insert(id)
            guard let rollName = try db.name(of: id, in: FixedNode.cameraRoll) else { continue }
            for entry in try ComputedViews.names(of: id, rollName: rollName, db) {
                if entries { changes.entry(entry.directory, entry.name) }
                changes.directory(entry.directory)
            }
        }
        return assets
    }
}
