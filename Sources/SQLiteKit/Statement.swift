import CSQLite3

/// A prepared statement. Bind with `bind`, advance with `step`, read columns by index.
/// Finalized in deinit; reused through `Database.statement(_:)`.
public final class Statement {
    private let handle: OpaquePointer
    private unowned let database: Database
    public let sql: String

    init(database: Database, sql: String) throws {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v2(database.handle, sql, -1, &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            throw SQLiteError(code: rc, message: database.lastErrorMessage, sql: sql)
        }
        self.handle = statement
        self.database = database
        self.sql = sql
    }

    deinit { sqlite3_finalize(handle) }

    /// Ends the current run early (releasing its read snapshot) and clears bindings.
    public func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    /// Binds values to ?1, ?2, … in order.
    @discardableResult
    public func bind(_ values: SQLValue...) throws -> Statement {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .null: rc = sqlite3_bind_null(handle, index)
            case .int(let v): rc = sqlite3_bind_int64(handle, index, v)
            case .double(let v): rc = sqlite3_bind_double(handle, index, v)
            case .text(let s): rc = sqlite3_bind_text(handle, index, s, -1, albumfs_sqlite_transient())
            case .blob(let bytes):
                rc = bytes.withUnsafeBytes { raw in bindBytes(raw, at: index, asText: false) }
            }
            try check(rc)
        }
        return self
    }

    /// Binds ?`index` (from 1) to a value read with `value(_:)`, text and blob as their raw bytes.
    public func bind(_ value: ColumnValue, at index: Int32) throws {
        switch value {
        case .null: try check(sqlite3_bind_null(handle, index))
        case .integer(let v): try check(sqlite3_bind_int64(handle, index, v))
        case .real(let v): try check(sqlite3_bind_double(handle, index, v))
        case .text(let bytes), .blob(let bytes):
            let isText = if case .text = value { true } else { false }
            try check(bytes.withUnsafeBytes { bindBytes($0, at: index, asText: isText) })
        }
    }

    private func bindBytes(_ raw: UnsafeRawBufferPointer, at index: Int32, asText: Bool) -> Int32 {
        // A zero-length blob must still bind as a blob, not NULL.
        let base = raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
        return asText
            ? sqlite3_bind_text(handle, index, base.assumingMemoryBound(to: CChar.self), Int32(raw.count), albumfs_sqlite_transient())
            : sqlite3_bind_blob(handle, index, base, Int32(raw.count), albumfs_sqlite_transient())
    }

    private func check(_ rc: Int32) throws {
        if rc != SQLITE_OK { throw SQLiteError(code: rc, message: database.lastErrorMessage, sql: sql) }
    }

    /// Columns of its rows.
    public var columnCount: Int32 { sqlite3_column_count(handle) }

    /// The value of `column` in the current row as it is stored (text as its bytes).
    public func value(_ column: Int32) -> ColumnValue {
        switch sqlite3_column_type(handle, column) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, column))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, column))
        case SQLITE_TEXT:
            let text = sqlite3_column_text(handle, column)
            let count = Int(sqlite3_column_bytes(handle, column))
            return .text(text.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? [])
        case SQLITE_BLOB: return .blob(blob(column))
        default: return .null
        }
    }

    /// Advances to the next row; false when done.
    public func step() throws -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE:
            sqlite3_reset(handle)
            return false
        default:
            let error = SQLiteError(code: rc, message: database.lastErrorMessage, sql: sql)
            sqlite3_reset(handle)
            throw error
        }
    }

    /// Runs the statement for at most one row and decodes it. It is reset
    /// whatever happens, so no read snapshot outlives the call (a statement
    /// left on a row keeps a read transaction open, and a WAL can then never
    /// be checkpointed past it).
    public func first<T>(_ decode: (Statement) throws -> T) throws -> T? {
        defer { reset() }
        guard try step() else { return nil }
        return try decode(self)
    }

    /// Runs the statement to its end and decodes every row.
    public func all<T>(_ decode: (Statement) throws -> T) throws -> [T] {
        defer { reset() }
        var rows: [T] = []
        while try step() { rows.append(try decode(self)) }
        return rows
    }

    /// Runs a statement that returns no rows.
    public func run() throws {
        while try step() {}
    }

    public func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    public func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(handle, column)) }
    public func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }
    public func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }
    public func optionalInt(_ column: Int32) -> Int? { isNull(column) ? nil : int(column) }
    public func optionalInt64(_ column: Int32) -> Int64? { isNull(column) ? nil : int64(column) }
    public func optionalDouble(_ column: Int32) -> Double? { isNull(column) ? nil : double(column) }
    public func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }

    public func optionalBlob(_ column: Int32) -> [UInt8]? { isNull(column) ? nil : blob(column) }

    public func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let base = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: base, count: count))
    }

    public func text(_ column: Int32) -> String {
        guard let text = sqlite3_column_text(handle, column) else { return "" }
        return String(cString: text)
    }
}

/// A column's value as SQLite stores it (`Statement.value`), text as its bytes: copied exactly.
public enum ColumnValue: Equatable, Sendable {
    case null
    case integer(Int64)
    case real(Double)
    case text([UInt8])
    case blob([UInt8])
}

/// A value to bind.
public enum SQLValue {
    case null
    case int(Int64)
    case double(Double)
    case text(String)
    case blob([UInt8])

    public static func int(_ value: Int) -> SQLValue { .int(Int64(value)) }
    public static func int(_ value: UInt64) -> SQLValue { .int(Int64(bitPattern: value)) }
    public static func int(_ value: UInt32) -> SQLValue { .int(Int64(value)) }
}
