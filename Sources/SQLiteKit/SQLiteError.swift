import CSQLite3

/// A failed SQLite call: the primary result code, SQLite's message and the SQL
/// that was running, so a log line says what went wrong and where.
public struct SQLiteError: Error, CustomStringConvertible, Sendable {
    public let code: Int32
    public let message: String
    public let sql: String?

    public init(code: Int32, message: String, sql: String? = nil) {
        self.code = code
        self.message = message
        self.sql = sql
    }

    /// The primary result code (extended codes carry detail in the high bits).
    public var primaryCode: Int32 { code & 0xff }

    public var isConstraintViolation: Bool { primaryCode == SQLITE_CONSTRAINT }
    public var isBusy: Bool { primaryCode == SQLITE_BUSY || primaryCode == SQLITE_LOCKED }
    public var isDiskFull: Bool { primaryCode == SQLITE_FULL }
    public var isReadOnly: Bool { primaryCode == SQLITE_READONLY }
    public var isCorrupt: Bool { primaryCode == SQLITE_CORRUPT || primaryCode == SQLITE_NOTADB }

    public var description: String {
        if let sql { return "SQLite error \(code): \(message) (in: \(sql))" }
        return "SQLite error \(code): \(message)"
    }
}
