#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import SQLiteKit

/// Three steps that record the order they ran in.
private func recordingMigrator(steps: Int = 3) -> Migrator {
    Migrator((1...steps).map { step in
        Migrator.Migration("step \(step)") { db in
            if step == 1 { try db.execute("CREATE TABLE log(step INTEGER)") }
            try db.execute("INSERT INTO log VALUES (\(step))")
        }
    })
}

private func loggedSteps(_ db: Database) throws -> [Int] {
    let select = try db.statement("SELECT step FROM log ORDER BY rowid")
    var steps: [Int] = []
    while try select.step() { steps.append(select.int(0)) }
    return steps
}

@Suite("Migrator")
struct MigratorTests {
    @Test("a new database gets every step, in order, and the latest version")
    func appliesInOrder() throws {
        let db = try memoryDatabase()
        let migrator = recordingMigrator()
        #expect(migrator.latestVersion == 3)
        #expect(try migrator.migrate(db) == .migrated(from: 0, to: 3))
        #expect(try loggedSteps(db) == [1, 2, 3])
        #expect(try Migrator.version(of: db) == 3)
    }

    @Test("an up-to-date database is left alone")
    func upToDate() throws {
        let db = try memoryDatabase()
        let migrator = recordingMigrator()
        _ = try migrator.migrate(db)
        #expect(try migrator.migrate(db) == .upToDate)
        #expect(try loggedSteps(db) == [1, 2, 3])
    }

    @Test("an older database gets only the steps it has not had")
    func migratesOlder() throws {
        let db = try memoryDatabase()
        #expect(try recordingMigrator(steps: 1).migrate(db) == .migrated(from: 0, to: 1))
        #expect(try recordingMigrator(steps: 3).migrate(db) == .migrated(from: 1, to: 3))
        #expect(try loggedSteps(db) == [1, 2, 3])
    }

    @Test("a newer database is reported and left untouched")
    func newerThanSupported() throws {
        let db = try memoryDatabase()
        try db.execute("PRAGMA user_version = 7")
        let migrator = recordingMigrator()
        #expect(try migrator.migrate(db) == .newerThanSupported(found: 7, supported: 3))
        #expect(try Migrator.version(of: db) == 7)
        #expect(try db.scalarInt("SELECT count(*) FROM sqlite_master WHERE name = 'log'") == 0)
    }

    @Test("a failing step rolls back alone; the earlier steps and their version stay")
    func failingStep() throws {
        struct Boom: Error {}
        let db = try memoryDatabase()
        let migrator = Migrator([
            .init("one") { db in try db.execute("CREATE TABLE one(x)") },
            .init("two") { db in
                try db.execute("CREATE TABLE two(x)")
                throw Boom()
            },
        ])
        #expect(throws: Boom.self) { try migrator.migrate(db) }
        #expect(try Migrator.version(of: db) == 1)
        #expect(try db.scalarInt("SELECT count(*) FROM sqlite_master WHERE name = 'one'") == 1)
        #expect(try db.scalarInt("SELECT count(*) FROM sqlite_master WHERE name = 'two'") == 0)
    }

    @Test("an empty migrator leaves a new database at version 0")
    func emptyMigrator() throws {
        let db = try memoryDatabase()
        #expect(try Migrator([]).migrate(db) == .upToDate)
        #expect(try Migrator.version(of: db) == 0)
    }
}

@Suite("Database transactions")
struct TransactionTests {
    @Test("a transaction commits when its body returns")
    func commits() throws {
        let db = try memoryDatabase()
        try db.execute("CREATE TABLE t(i INTEGER)")
        let result = try db.transaction { () throws -> Int in
            try db.execute("INSERT INTO t VALUES (1)")
            try db.execute("INSERT INTO t VALUES (2)")
            return 42
        }
        #expect(result == 42)
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 2)
    }

    @Test("a transaction rolls back every change when its body throws")
    func rollsBack() throws {
        struct Boom: Error {}
        let db = try memoryDatabase()
        try db.execute("CREATE TABLE t(i INTEGER); INSERT INTO t VALUES (0);")
        #expect(throws: Boom.self) {
            try db.transaction {
                try db.execute("INSERT INTO t VALUES (1)")
                try db.execute("UPDATE t SET i = 99")
                throw Boom()
            }
        }
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 1)
        #expect(try db.scalarInt("SELECT i FROM t") == 0)
        // The connection is usable again for another transaction.
        try db.transaction { try db.execute("INSERT INTO t VALUES (5)") }
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 2)
    }

    @Test("a failing statement inside a transaction rolls back the earlier ones")
    func rollsBackOnSQLiteError() throws {
        let db = try memoryDatabase()
        try db.execute("CREATE TABLE t(k INTEGER PRIMARY KEY)")
        #expect(throws: SQLiteError.self) {
            try db.transaction {
                try db.execute("INSERT INTO t VALUES (1)")
                try db.execute("INSERT INTO t VALUES (1)")
            }
        }
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 0)
    }

    @Test("a second connection waits for the busy timeout and then sees the commit")
    func twoConnections() throws {
        var template = Array("/tmp/sqlitekit-unit-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { Issue.record("mkdtemp failed"); return }
        let directory = String(cString: made)
        defer {
            for suffix in ["", "-wal", "-shm"] { unlink(directory + "/db.sqlite" + suffix) }
            rmdir(directory)
        }
        let path = directory + "/db.sqlite"
        let writer = try Database(path: path)
        try writer.execute("PRAGMA journal_mode = WAL; CREATE TABLE t(i INTEGER);")
        let other = try Database(path: path)
        other.setBusyTimeout(milliseconds: 50)
        try writer.execute("BEGIN IMMEDIATE; INSERT INTO t VALUES (1);")
        let busy = #expect(throws: SQLiteError.self) { try other.execute("BEGIN IMMEDIATE") }
        #expect(busy?.isBusy == true)
        try writer.execute("COMMIT")
        #expect(try other.scalarInt("SELECT count(*) FROM t") == 1)
    }
}
