#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import SQLiteKit

/// A private in-memory database.
func memoryDatabase() throws -> Database {
    try Database(path: ":memory:")
}

@Suite("Statement: binding and reading values")
struct StatementTests {
    @Test("blobs round-trip byte for byte, including NUL and invalid UTF-8")
    func blobRoundTrip() throws {
        let db = try memoryDatabase()
        try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)")
        let values: [[UInt8]] = [[0x00], [0xff, 0xfe, 0x00, 0x41], Array(0...255), [UInt8](repeating: 7, count: 100_000)]
        for (i, value) in values.enumerated() {
            try db.statement("INSERT INTO t(id, b) VALUES (?1, ?2)").bind(.int(i), .blob(value)).run()
        }
        let select = try db.statement("SELECT b FROM t WHERE id = ?1")
        for (i, value) in values.enumerated() {
            try select.bind(.int(i))
            #expect(try select.step())
            #expect(select.blob(0) == value)
            #expect(try !select.step())
        }
    }

    @Test("an empty blob binds as an empty blob, not NULL")
    func emptyBlob() throws {
        let db = try memoryDatabase()
        try db.execute("CREATE TABLE t(b BLOB NOT NULL)")
        try db.statement("INSERT INTO t(b) VALUES (?1)").bind(.blob([])).run()
        let select = try db.statement("SELECT b, typeof(b), length(b) FROM t")
        #expect(try select.step())
        #expect(!select.isNull(0))
        #expect(select.blob(0) == [])
        #expect(select.text(1) == "blob")
        #expect(select.int(2) == 0)
        // And it matches an empty-blob lookup.
        let lookup = try db.statement("SELECT count(*) FROM t WHERE b = ?1")
        try lookup.bind(.blob([]))
        #expect(try lookup.step())
        #expect(lookup.int(0) == 1)
    }

    @Test("blob equality is by bytes: a blob key is not a text key")
    func blobNotText() throws {
        let db = try memoryDatabase()
        try db.execute("CREATE TABLE t(k BLOB PRIMARY KEY)")
        try db.statement("INSERT INTO t(k) VALUES (?1)").bind(.blob(Array("abc".utf8))).run()
        let count = try db.statement("SELECT count(*) FROM t WHERE k = ?1")
        try count.bind(.blob(Array("abc".utf8)))
        #expect(try count.step())
        #expect(count.int(0) == 1)
        count.reset()
        try count.bind(.blob(Array("ABC".utf8)))
        #expect(try count.step())
        #expect(count.int(0) == 0)
    }

    @Test("integers, text and NULL round-trip")
    func otherValues() throws {
        let db = try memoryDatabase()
        try db.execute("CREATE TABLE t(i INTEGER, s TEXT, n)")
        try db.statement("INSERT INTO t VALUES (?1, ?2, ?3)").bind(.int(Int64.min), .text("héllo"), .null).run()
        try db.statement("INSERT INTO t VALUES (?1, ?2, ?3)").bind(.int(UInt64.max), .text(""), .int(UInt32.max)).run()
        let select = try db.statement("SELECT i, s, n FROM t ORDER BY rowid")
        #expect(try select.step())
        #expect(select.int64(0) == Int64.min)
        #expect(select.text(1) == "héllo")
        #expect(select.isNull(2))
        #expect(try select.step())
        #expect(UInt64(bitPattern: select.int64(0)) == UInt64.max)
        #expect(select.text(1) == "")
        #expect(select.int64(2) == Int64(UInt32.max))
        #expect(try !select.step())
    }

    @Test("a cached statement is reused and starts afresh")
    func statementCache() throws {
        let db = try memoryDatabase()
        try db.execute("CREATE TABLE t(i INTEGER); INSERT INTO t VALUES (1), (2), (3);")
        let sql = "SELECT i FROM t ORDER BY i"
        let first = try db.statement(sql)
        #expect(try first.step())
        #expect(first.int(0) == 1)
        // Abandoned mid-run; the next user starts from the first row.
        let second = try db.statement(sql)
        #expect(first === second)
        #expect(try second.step())
        #expect(second.int(0) == 1)
    }

    @Test("a statement can be run again after it finished")
    func rerun() throws {
        let db = try memoryDatabase()
        try db.execute("CREATE TABLE t(i INTEGER)")
        let insert = try db.statement("INSERT INTO t VALUES (?1)")
        for i in 0..<5 { try insert.bind(.int(i)).run() }
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 5)
        #expect(try db.scalarInt("SELECT sum(i) FROM t") == 10)
        #expect(db.changes == 1)
    }

    @Test("errors carry the code, the message and the SQL")
    func errors() throws {
        let db = try memoryDatabase()
        let syntax = #expect(throws: SQLiteError.self) { try db.execute("SELEC 1") }
        #expect(syntax?.sql == "SELEC 1")
        #expect(syntax?.message.isEmpty == false)
        #expect(throws: SQLiteError.self) { try db.statement("SELECT * FROM missing") }

        try db.execute("CREATE TABLE t(k INTEGER PRIMARY KEY)")
        try db.statement("INSERT INTO t VALUES (?1)").bind(.int(1)).run()
        let constraint = #expect(throws: SQLiteError.self) {
            try db.statement("INSERT INTO t VALUES (?1)").bind(.int(1)).run()
        }
        #expect(constraint?.isConstraintViolation == true)
        #expect(constraint?.isBusy == false)
        // The failed statement can be used again.
        try db.statement("INSERT INTO t VALUES (?1)").bind(.int(2)).run()
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 2)
    }

    @Test("a file that is not a database reports corruption")
    func notADatabase() throws {
        var template = Array("/tmp/sqlitekit-unit-XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        #expect(fd >= 0)
        let path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer { unlink(path) }
        let garbage = [UInt8](repeating: 0x5a, count: 4096)
        _ = garbage.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        let db = try Database(path: path, mode: .readWrite)
        let error = #expect(throws: SQLiteError.self) { try db.scalarInt("SELECT count(*) FROM sqlite_master") }
        #expect(error?.isCorrupt == true)
    }

    @Test("opening a missing file without create fails")
    func openMissing() {
        #expect(throws: SQLiteError.self) {
            try Database(path: "/tmp/sqlitekit-definitely-missing-\(UInt64.random(in: 0...UInt64.max))/x.db", mode: .readWrite)
        }
    }
}
