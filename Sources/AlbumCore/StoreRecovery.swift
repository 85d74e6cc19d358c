import SQLiteKit

/// Finishes what a crash interrupted, at mount, before the first request.
/// Every step is O(what was interrupted), never a scan of the whole store, so
/// a library of a million assets mounts as fast as an empty one.
struct StoreRecovery {
    let db: Database
    let content: ContentStore
    /// More ids without data than one transaction inserts in a row.
    static let leftoverGap = 64

    func run() throws {
        // Deletions that committed before their data was freed.
        let purges = try db.pendingPurges()
        for id in purges { content.remove(id) }
        try db.transaction {
            for id in purges { try db.purgeDone(id) }
        }
        // Transfers a crash cut short (SEMANTICS.md § Remote storage): data set
        // aside by an eviction goes if the eviction committed, else back;
        // data half fetched goes (the asset is still evicted: fetched again).
        let (evicting, fetching) = content.leftoverTransfers()
        for id in evicting {
            if try db.isEvicted(id) { content.removeTransfer(content.evictPath(of: id)) } else { content.restoreEvicted(id) }
        }
        for path in fetching { content.removeTransfer(path) }
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
        // A transaction that never committed leaves content files for ids
        // above the last one committed: those it inserted, in order, with
        // nodes that have no data (a trash's directories) between them.
        // Transactions are serialised, so the leftovers are the next ids
        // with gaps of a few: looked for until `leftoverGap` ids in a row
        // have no file.
        var id = try db.lastAllocatedID() + 1, missing = 0
        while missing < Self.leftoverGap {
            if content.size(of: id) != nil {
                content.remove(id)
                missing = 0
            } else {
                missing += 1
            }
            id += 1
        }
    }
}
