#if canImport(Glibc)
import Glibc
#endif
import SQLiteKit
import Zstd

/// What a recovery did (`albumfs recover`'s summary).
public struct RecoveryReport: Sendable {
    /// The snapshot it started from (nil: none was usable; an empty library).
    public var snapshot: String?
    /// Snapshots skipped: they did not decompress or were not a store.
    public var skipped: [String] = []
    public var assets: Int64 = 0
    /// Assets put back (or brought up to date) from companions newer than the snapshot.
    public var fromCompanions = 0
    /// Assets of the snapshot whose data never reached the bucket: left out.
    public var lost = 0
}

/// A library rebuilt from its bucket alone (SEMANTICS.md § Surviving the
/// machine): the latest usable snapshot at or before a time, then the
/// companions of later uploads.
extension Library {
    /// How far the bucket's clock (a companion's time of writing) and the
    /// writer's (a snapshot's key) may disagree: companions written up to
    /// this long before the snapshot are still read.
    static let clockMargin = 3600

    /// How long a recovery's indexes take, as a share of its rows' time (a
    /// 1,000,000-asset snapshot: 2.4 s after 4.9 s), for the time left it shows.
    static let indexShare = 0.5

    /// Builds a new store at `location` from `backend`: `at` is a stamp
    /// (`YYYYMMDDTHHMMSSmmm`, or a prefix of one) the snapshot may not be
    /// newer than. `progress` is told what is being done.
    public static func recover(from backend: any ObjectBackend, remote: RemoteConfiguration, at: String?, into location: StoreLocation,
                               owner: Caller, options: LibraryOptions = LibraryOptions(),
                               progress: (String) -> Void = { _ in }) throws -> (Library, RecoveryReport) {
        guard !location.holdsStore else { throw LibraryError.unusableStore("\(location.root) already holds a store: recover into a new directory") }
        try location.createDirectory()
        var report = RecoveryReport()
        progress("listing the snapshots in \(remote.url)")
        let listed = try backend.list(Snapshots.prefix)
        let sizes = Dictionary(listed.map { ($0.key, $0.size) }, uniquingKeysWith: { first, _ in first })
        let snapshots = listed.map(\.key)
            .filter { key in Snapshots.time(of: key) != nil && at.map { Snapshots.stamp(ofKey: key).prefix($0.count) <= $0 } ?? true }
            .sorted(by: >)
        var snapshotTime: Int?
        for key in snapshots {
            progress("fetching the snapshot \(key) (\((sizes[key] ?? 0) >> 20) MiB)")
            do {
                try restore(key, from: backend, to: location, progress: progress)
                report.snapshot = key
                snapshotTime = Snapshots.time(of: key)
                break
            } catch {
                options.log("recover: the snapshot \(key) is not usable (\(error)); trying the one before it")
                report.skipped.append(key)
            }
        }
        let library = try Library(location: location, owner: owner, create: report.snapshot == nil, options: options)
        try library.write { db in
            try db.setRemoteConfiguration(remote)
            try db.adoptRecoveredSnapshot()
        }
        progress("listing the uploads")
        // A companion written well before the snapshot changes nothing (its
        // upload is in the snapshot, or its asset was purged before it): not
        // fetched. One GET each was 11 hours for 1,000,000 uploads.
        let since = snapshotTime.map { $0 - Self.clockMargin }
        let companions = try backend.list(Companion.prefix).filter { listed in
            guard let since, let modified = listed.modified else { return true }
            return modified >= since
        }.map(\.key)
        // Albums made again take ids after every companion's: each asset keeps its own.
        if let highest = companions.compactMap(Companion.asset(ofKey:)).max() {
            try library.write { db in try db.reserveNodeIDs(atLeastThrough: highest) }
        }
        let started = WaitableValue<Int>.now()
        for (index, key) in companions.enumerated() {
            if index % 100 == 0 {
                // Time left from the pace so far (one GET each: even).
                let elapsed = WaitableValue<Int>.now() - started
                let left = index == 0 ? "" : ", about \(Int(elapsed / Double(index) * Double(companions.count - index)) + 1) s left"
                progress("reading the uploads after the snapshot: \(index)/\(companions.count)\(left)")
            }
            guard let bytes = try backend.get(key), let companion = Companion(decoding: bytes) else {
                options.log("recover: \(key) is not a companion albumfs wrote; skipped")
                continue
            }
            if try library.adopt(companion, snapshotTime: snapshotTime) { report.fromCompanions += 1 }
        }
        let lost = try library.read { db in try db.assetsWithoutObjects() }
        for id in lost { _ = try library.mutate(by: Caller(uid: 0, gid: 0)) { m in try m.purge(id) } }
        report.lost = lost.count
        report.assets = try library.read { db in try db.assetCount() }
        return (library, report)
    }

    /// Fetches snapshot `key` and makes the store's database of it, with the
    /// content directory of a store all of whose data is remote. A snapshot
    /// is the database's rows (SnapshotFormat), or, from versions before
    /// it, a copy of the database's file.
    private static func restore(_ key: String, from backend: any ObjectBackend, to location: StoreLocation,
                                progress: (String) -> Void) throws {
        let packedPath = location.root + "/snapshot.zst", partial = location.databasePath + ".recovering"
        defer { _ = Glibc.unlink(packedPath); _ = Glibc.unlink(partial) }
        let packed = Glibc.open(packedPath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard packed >= 0 else { throw LibraryError(errno: errno) }
        defer { close(packed) }
        _ = try backend.get(key, into: packed)
        guard lseek(packed, 0, SEEK_SET) == 0 else { throw LibraryError(errno: errno) }
        // The rows go from the decompressor straight into the new database (no file of them).
        let reader = try Zstd.Reader(packed)
        if var decoder = try SnapshotDecoder(reading: reader.read) {
            // How far into the snapshot's bytes the decompressor has read, and the
            // indexes after the rows: the time left at the pace so far.
            var size = stat()
            let total = fstat(packed, &size) == 0 ? Double(size.st_size) : 0
            let started = WaitableValue<Int>.now()
            var rowsTook: Double?
            try Database.rebuild(from: &decoder, into: partial) { step in
                let elapsed = WaitableValue<Int>.now() - started
                switch step {
                case .rows(let rows):
                    let done = total > 0 ? min(1, Double(lseek(packed, 0, SEEK_CUR)) / total) : 0
                    let left = done > 0.02 ? ", about \(Int(elapsed / done * (1 - done + Self.indexShare)) + 1) s left" : ""
                    progress("restoring the snapshot: \(rows) rows, \(Int(done * 100))%\(left)")
                case .indexes(let built, let count):
                    let rows = rowsTook ?? elapsed
                    rowsTook = rows
                    let left = max(1, Int(rows * Self.indexShare - (elapsed - rows)) + 1)
                    progress("restoring the snapshot: building its indexes, \(built)/\(count), about \(left) s left")
                }
            }
        } else {
            // An older version's snapshot: the database file itself.
            guard lseek(packed, 0, SEEK_SET) == 0 else { throw LibraryError(errno: errno) }
            let database = Glibc.open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard database >= 0 else { throw LibraryError(errno: errno) }
            defer { close(database) }
            try Zstd.decompress(packed, into: database)
        }
        let database = Glibc.open(partial, O_RDONLY | O_CLOEXEC)
        guard database >= 0 else { throw LibraryError(errno: errno) }
        let synced = fsync(database) == 0
        close(database)
        guard synced else { throw LibraryError(errno: errno) }
        // A store's database, whole: SQLite's own check before it is used.
        let check = try Database(path: partial, mode: .readOnly)
        let verdict = try check.statement("PRAGMA quick_check").first { $0.text(0) }
        guard verdict == "ok", try check.scalarInt("SELECT count(*) FROM sqlite_schema WHERE name = 'nodes'") == 1 else {
            throw LibraryError.unusableStore("not a whole albumfs database (\(verdict ?? "no answer"))")
        }
        guard Glibc.rename(partial, location.databasePath) == 0 else { throw LibraryError(errno: errno) }
        let content = ContentStore(directory: location.contentPath)
        try content.createLayout()
        try content.createMarker()
    }

    /// Puts back the asset of `companion` if the snapshot (taken at
    /// `snapshotTime`) does not have it as uploaded: a new asset in the roll
    /// and its albums, or the snapshot's asset brought up to the uploaded
    /// content. An upload at or before the snapshot whose asset the
    /// snapshot lacks was purged before it: left out. Whether it changed anything.
    func adopt(_ companion: Companion, snapshotTime: Int?) throws(LibraryError) -> Bool {
        let newer = snapshotTime.map { companion.uploaded >= $0 } ?? true
        let now = options.now()
        return try write { db -> Bool in
            if let row = try db.attributes(of: companion.asset), row.kind == .asset {
                if let object = try db.remoteObject(of: companion.asset), object.digest.sha256 == companion.digest.sha256 { return false }
                guard newer else { return false }
                try db.setRemoteObject(companion.asset, companion.digest, etag: nil, modified: companion.modified)
                try db.writeContentState(companion.asset, size: companion.digest.size, modified: companion.modified, changed: now)
                try db.markEvicted(companion.asset)
                return true
            }
            guard newer else { return false }
            let owner = Caller(uid: companion.uid, gid: companion.gid)
            let id = companion.asset
            try db.insertRecoveredAsset(id, mode: companion.mode, owner: owner, modified: companion.modified)
            try db.writeContentState(id, size: companion.digest.size, modified: companion.modified, changed: now)
            try db.insertEntry(FixedNode.cameraRoll, try db.freeName(in: FixedNode.cameraRoll, for: companion.rollName), id)
            try db.touchDirectory(FixedNode.cameraRoll, now: now)
            for path in companion.albums {
                guard let album = try db.recoveredAlbum(at: path.dropLast(), now: now), let name = path.last else { continue }
                try db.insertEntry(album, try db.freeName(in: album, for: name), id)
                try db.touchDirectory(album, now: now)
            }
            if companion.favorite { try db.setFavorite(id, true) }
            try db.setRemoteObject(id, companion.digest, etag: nil, modified: companion.modified)
            try db.markEvicted(id)
            return true
        }
    }
}
