import Testing
@testable import SQLiteKit

@Suite("CommitCounter")
struct CommitCounterTests {
    @Test("every commit counts, autocommitted statements too; reads and rollbacks do not")
    func countsCommits() throws {
        let db = try memoryDatabase()
        try db.execute("CREATE TABLE t(x INTEGER)")
        let start = db.commits.current
        try db.statement("INSERT INTO t VALUES (1)").run()
        #expect(db.commits.current == start + 1)
        try db.transaction {
            try db.statement("INSERT INTO t VALUES (2)").run()
            try db.statement("INSERT INTO t VALUES (3)").run()
        }
        #expect(db.commits.current == start + 2)
        _ = try db.statement("SELECT count(*) FROM t").first { $0.int(0) }
        struct Abandon: Error {}
        _ = try? db.transaction { try db.statement("INSERT INTO t VALUES (4)").run(); throw Abandon() }
        #expect(db.commits.current == start + 2)
    }
}
