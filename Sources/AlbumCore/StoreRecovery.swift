import SQLiteKit

/// Finishes what a crash interrupted, at mount, before the first request.
/// Every step is O(what was interrupted), never a scan of the whole store, so
/// a library of a million assets mounts as fast as an empty one.
struct StoreRecovery {
    let db: Database
    let content: ContentStore

    func run() throws {
        // Deletions that committed before their data was freed.
        let purges = try db.pendingPurges()
        for id in purges { content.remove(id) }
        try db.transaction {
            for id in purges { try db.purgeDone(id) }
        }
        // Writes that were under way: the data may be ahead of the row.
        let unfinished = try db.unfinishedWrites()
        try db.transaction {
            for id in unfinished {
                if let stamp = content.stamp(of: id) {
                    try db.adoptInterruptedWrite(id, size: stamp.size, modified: stamp.modified)
                }
                try db.endWrite(id)
            }
        }
        // A create whose transaction never committed leaves a content file
        // for an id above the last one handed out (creates are serialised,
        // so only the next few ids can be such leftovers).
        let last = try db.lastAllocatedID()
        for id in (last + 1)...(last + 4) where content.size(of: id) != nil {
            content.remove(id)
        }
    }
}
