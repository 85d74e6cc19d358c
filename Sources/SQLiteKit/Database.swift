import CSQLite3
import Synchronization

/// One SQLite connection. It may move between threads but must not be used by
/// two at once: the owner serialises use behind a lock (which is why SQLite is
/// opened with NOMUTEX), hence the unchecked Sendable.
public final class Database: @unchecked Sendable {
    let handle: OpaquePointer
    private var statementCache: [String: Statement] = [:]
    /// Every commit of this connection, autocommitted statements included,
    /// counted by SQLite's commit hook: readable without the connection.
    public let commits = CommitCounter()

    public struct OpenMode: Sendable {
        public let flags: Int32
        public static let readWriteCreate = OpenMode(flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
        public static let readWrite = OpenMode(flags: SQLITE_OPEN_READWRITE)
        public static let readOnly = OpenMode(flags: SQLITE_OPEN_READONLY)
    }

    public init(path: String, mode: OpenMode = .readWriteCreate) throws {
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, mode.flags | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close_v2(db)
            throw SQLiteError(code: rc, message: message)
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
        // The counter lives as long as the connection (this object holds both).
        sqlite3_commit_hook(db, { counter in
            Unmanaged<CommitCounter>.fromOpaque(counter!).takeUnretainedValue().count()
            return 0   // 0: let the commit go on
        }, Unmanaged.passUnretained(commits).toOpaque())
    }

    deinit {
        statementCache.removeAll()
        sqlite3_close_v2(handle)
    }

    /// Waits up to `milliseconds` for another connection's lock instead of failing at once.
    public func setBusyTimeout(milliseconds: Int32) {
        sqlite3_busy_timeout(handle, milliseconds)
    }

    /// Runs one or more statements that return no rows.
    public func execute(_ sql: String) throws {
        var errorMessage: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &errorMessage)
        if rc != SQLITE_OK {
            let message = errorMessage.map { String(cString: $0) } ?? lastErrorMessage
            sqlite3_free(errorMessage)
            throw SQLiteError(code: rc, message: message, sql: sql)
        }
    }

    /// A prepared statement for `sql`, prepared once per connection and reused.
    public func statement(_ sql: String) throws -> Statement {
        if let cached = statementCache[sql] {
            cached.reset()
            return cached
        }
        let statement = try Statement(database: self, sql: sql)
        statementCache[sql] = statement
        return statement
    }

    /// Runs `body` in a transaction; commits when it returns, rolls back when it throws.
    /// IMMEDIATE takes the write lock up front so a writer never fails half-way on BUSY.
    /// The three statements are prepared once, like any other (sqlite3_exec
    /// would parse them anew for every transaction).
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try statement("BEGIN IMMEDIATE").run()
        do {
            let result = try body()
            try statement("COMMIT").run()
            return result
        } catch {
            try? statement("ROLLBACK").run()
            throw error
        }
    }

    /// Makes this database's every page the database at `path`'s (SQLite's
    /// backup API, in one step: one transaction on this connection, which
    /// keeps its statements; they are prepared again for the new schema).
    public func replaceContents(withDatabaseAt path: String) throws {
        let source = try Database(path: path, mode: .readOnly)
        guard let backup = sqlite3_backup_init(handle, "main", source.handle, "main") else {
            throw SQLiteError(code: sqlite3_errcode(handle), message: lastErrorMessage, sql: "backup from \(path)")
        }
        let stepped = sqlite3_backup_step(backup, -1)
        let finished = sqlite3_backup_finish(backup)
        guard stepped == SQLITE_DONE, finished == SQLITE_OK else {
            throw SQLiteError(code: stepped == SQLITE_DONE ? finished : stepped, message: lastErrorMessage, sql: "backup from \(path)")
        }
    }

    /// True when SQLite fell back to read-only (the file is not writable).
    public var isReadOnly: Bool { sqlite3_db_readonly(handle, "main") == 1 }

    public var lastInsertedRowID: Int64 { sqlite3_last_insert_rowid(handle) }
    public var changes: Int { Int(sqlite3_changes(handle)) }
    var lastErrorMessage: String { String(cString: sqlite3_errmsg(handle)) }

    /// The single integer a query like `PRAGMA user_version` returns.
    public func scalarInt(_ sql: String) throws -> Int64 {
        try self.statement(sql).first { $0.int64(0) } ?? 0
    }
}

/// How many commits a connection has made. The count rises as a commit
/// begins (SQLite's commit hook), under the connection's owner's lock, so
/// whoever reads a value and then takes that lock sees every change of the
/// commits counted. A commit that then fails still counts (one count too
/// many, never one too few).
public final class CommitCounter: Sendable {
    private let value = Atomic<UInt64>(0)
    public var current: UInt64 { value.load(ordering: .acquiring) }
    fileprivate func count() { _ = value.add(1, ordering: .releasing) }
}

