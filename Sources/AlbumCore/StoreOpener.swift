#if canImport(Glibc)
import Glibc
#endif
import SQLiteKit

/// Opens a store's database: creates a new store on first use, checks that an
/// existing one is whole and of a format this build knows, and migrates an
/// older one. Every refusal is a one-line `.unusableStore` reason.
struct StoreOpener {
    let location: StoreLocation
    let owner: Caller
    let readOnly: Bool

    func open() throws(LibraryError) -> Database {
        let isNew = try prepareDirectory()
        let db: Database
        do {
            db = try Database(path: location.databasePath, mode: .readWriteCreate)
            db.setBusyTimeout(milliseconds: 5_000)
            try db.execute("PRAGMA foreign_keys = ON")
            let mode = try db.statement("PRAGMA journal_mode = WAL")
            _ = try mode.step()
            mode.reset()
            // WAL + NORMAL: a commit survives a killed daemon; fsync() syncs the WAL
            // explicitly to survive a power loss.
            try db.execute("PRAGMA synchronous = NORMAL")
            try checkIntegrityCheap(db)
            try migrate(db, isNew: isNew)
        } catch let error as LibraryError {
            throw error
        } catch let error as SQLiteError {
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

    /// Creates the store directory (private, 0700) when missing; returns whether
    /// the store is new. A database without its content directory, or the other
    /// way round, is refused: an unplugged disk is not an empty library.
    private func prepareDirectory() throws(LibraryError) -> Bool {
        try location.createDirectory()
        var info = stat()
        guard stat(location.root, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw .unusableStore("the store \(location.root) is not a directory")
        }
        let hasDatabase = exists(location.databasePath)
        let hasContent = exists(location.contentPath)
        switch (hasDatabase, hasContent) {
        case (false, false):
            try ContentStore(directory: location.contentPath).createLayout()
            return true
        case (true, true):
            return false
        case (true, false):
            throw .unusableStore("the store \(location.root) has a database but no content directory (is its disk plugged in?)")
        case (false, true):
            throw .unusableStore("the store \(location.root) has a content directory but no database \(location.databasePath)")
        }
    }

    private func checkIntegrityCheap(_ db: Database) throws {
        // Reading the schema fails at once on a file that is not a database.
        _ = try db.scalarInt("SELECT count(*) FROM sqlite_master")
    }

    private func migrate(_ db: Database, isNew: Bool) throws {
        let outcome = try Schema.migrator.migrate(db)
        switch outcome {
        case .newerThanSupported(let found, let supported):
            throw LibraryError.unusableStore(
                "the store \(location.root) has format \(found), newer than this albumfs supports (\(supported)); upgrade albumfs")
        case .migrated(from: 0, _):
            try db.transaction {
                try Schema.createFixedNodes(db, owner: owner, now: currentTime())
            }
        case .migrated, .upToDate:
            break
        }
        guard try db.kind(of: FixedNode.root) == .root else {
            throw LibraryError.unusableStore("the store's database \(location.databasePath) has no root directory")
        }
    }

    private func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }
}
