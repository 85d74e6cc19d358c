#if canImport(Glibc)
import Glibc
#endif
import SQLiteKit

/// Opens a store's database: creates a new store when asked to, checks that an
/// existing one is whole and of a format this build knows, and migrates an
/// older one. Every refusal is a one-line `.unusableStore` reason.
struct StoreOpener {
    let location: StoreLocation
    let owner: Caller
    let readOnly: Bool
    /// Create the store when none is there (else that is refused).
    let create: Bool

    func open() throws(LibraryError) -> Database {
        try prepareDirectory()
        let db: Database
        do {
            db = try Database(path: location.databasePath, mode: .readWriteCreate)
            db.setBusyTimeout(milliseconds: 5_000)
            try db.enforceForeignKeys()
            // Every check comes before the first change: a refused store is
            // left exactly as it was.
            try checkIntegrityCheap(db)
            if db.isReadOnly && !readOnly {
                throw LibraryError.unusableStore("the store's database \(location.databasePath) is not writable (mount with -o ro to read it)")
            }
            let version = try Migrator.version(of: db)
            if version > Schema.migrator.latestVersion {
                throw LibraryError.unusableStore(
                    "the store \(location.root) has format \(version), newer than this albumfs supports (\(Schema.migrator.latestVersion)); upgrade albumfs")
            }
            try checkContent(db, schemaVersion: version)
            try db.useWriteAheadLog()
            try migrate(db)
        } catch let error as LibraryError {
            throw error
        } catch let error as SQLiteError {
            if error.isDiskFull { throw .noSpace }
            if error.isCorrupt {
                throw .unusableStore("the store's database \(location.databasePath) is corrupt or not a database (\(error.message))")
            }
            if error.isReadOnly {
                throw .unusableStore("the store's database \(location.databasePath) is not writable")
            }
            throw .unusableStore("cannot open the store's database \(location.databasePath): \(error.message)")
        } catch {
            throw .unusableStore("cannot open the store's database: \(error)")
        }
        return db
    }

    /// Creates the store directory (private, 0700) and, for a new store, its
    /// content directory. A database without its content directory, or the
    /// other way round, is refused: an unplugged disk is not an empty library.
    private func prepareDirectory() throws(LibraryError) {
        if create { try location.createDirectory() } else { try location.requireStore() }
        var info = stat()
        guard stat(location.root, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw .unusableStore("the store \(location.root) is not a directory")
        }
        // Someone else's store, or one anyone may write into, could be changed
        // behind the daemon's back: refuse it rather than serve it.
        if info.st_uid != geteuid() {
            throw .unusableStore("the store \(location.root) belongs to uid \(info.st_uid), not to you (uid \(geteuid()))")
        }
        if info.st_mode & S_IWOTH != 0 {
            throw .unusableStore("the store \(location.root) is writable by everyone; make it private: chmod 700 \(location.root)")
        }
        let hasDatabase = exists(location.databasePath)
        let hasContent = exists(location.contentPath)
        switch (hasDatabase, hasContent) {
        case (false, false):
            // A new store: private, even in a directory made beforehand.
            chmod(location.root, 0o700)
            try ContentStore(directory: location.contentPath).createLayout()
            try createContentMarker()
        case (true, true):
            break
        case (true, false):
            throw .unusableStore("the store \(location.root) has a database but no content directory (is its disk plugged in?)")
        case (false, true):
            throw .unusableStore("the store \(location.root) has a content directory but no database \(location.databasePath)")
        }
    }

    private func checkIntegrityCheap(_ db: Database) throws {
        try db.readSchema()
    }

    private func migrate(_ db: Database) throws {
        let outcome = try Schema.migrator.migrate(db)
        switch outcome {
        case .newerThanSupported(let found, let supported):
            throw LibraryError.unusableStore(
                "the store \(location.root) has format \(found), newer than this albumfs supports (\(supported)); upgrade albumfs")
        case .migrated, .upToDate:
            break
        }
        // A new store, or one whose creation was cut short between its schema
        // and its fixed directories: an empty node table gets them now.
        if try db.hasNoNodes() && !readOnly {
            try db.transaction {
                try Schema.createFixedNodes(db, owner: owner, now: currentTime())
            }
        } else if !readOnly {
            try Schema.addViewDirectories(db)
        }
        guard try db.kind(of: FixedNode.root) == .root else {
            throw LibraryError.unusableStore("the store's database \(location.databasePath) has no root directory")
        }
        if !readOnly {
            try StoreRecovery(db: db, content: ContentStore(directory: location.contentPath)).run()
        }
    }

    /// The content directory carries a marker file. Without it the directory
    /// is empty or not this store's (a disk not plugged in, a mount point left
    /// bare): while the database lists assets that is refused, never shown as
    /// an empty library and never "cleaned up".
    private var contentMarker: String { ContentStore(directory: location.contentPath).markerPath }

    private func checkContent(_ db: Database, schemaVersion: Int) throws {
        let content = ContentStore(directory: location.contentPath)
        if exists(contentMarker) {
            // A database with no schema next to a content directory that holds
            // data was truncated or replaced: starting a new library there would
            // treat every photo as a leftover.
            if schemaVersion == 0, try content.holdsAnyData() {
                throw LibraryError.unusableStore(
                    "the store's database \(location.databasePath) is empty, but its content directory holds photos: refusing to start a new library over them (restore the database from a backup)")
            }
            return
        }
        let hasAssets = try schemaVersion > 0 && db.hasAssets()
        if hasAssets {
            throw LibraryError.unusableStore(
                "the store's content directory \(location.contentPath) is empty or not this store's, but the database lists assets (is its disk plugged in?)")
        }
        if !readOnly {
            try content.createLayout()
            try createContentMarker()
        }
    }

    private func createContentMarker() throws(LibraryError) {
        try ContentStore(directory: location.contentPath).createMarker()
    }

    private func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }
}
