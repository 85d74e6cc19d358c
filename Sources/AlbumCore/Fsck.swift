#if canImport(Glibc)
import Glibc
#endif
import SQLiteKit

/// Checks a store's database against its content directory: one pass over
/// each, compared through hash sets (O(m+n)). Run on a store no daemon holds.
public struct StoreChecker {
    public struct Problem: Sendable, CustomStringConvertible {
        public let description: String
        /// What `--repair` does about it, or nil when it cannot without losing data.
        public let repair: String?
        /// When `repair` is nil: why no change to the store would be safe.
        public var whyNotRepaired: String? = nil
    }

    public let location: StoreLocation
    public init(location: StoreLocation) { self.location = location }

    /// Finds problems and, when `repair` is set, fixes those that lose no user data.
    public func check(repair: Bool) throws(LibraryError) -> [Problem] {
        guard access(location.root, F_OK) == 0 else {
            throw .unusableStore("there is no store at \(location.root)")
        }
        guard access(location.databasePath, F_OK) == 0 else {
            throw .unusableStore("the store \(location.root) has no database \(location.databasePath)")
        }
        // A mounted store changes under the check; only a read-only mount is
        // still for checking, and never for repairing.
        let lock: StoreLock?
        do {
            lock = try StoreLock(location: location)
        } catch {
            guard !repair, StoreLock.holderMode(location) == .readOnly else {
                throw .unusableStore("the store \(location.root) is mounted; unmount it first (a read-only mount can be checked without --repair)")
            }
            lock = nil
        }
        defer { withExtendedLifetime(lock) {} }
        do {
            let db = try Database(path: location.databasePath, mode: repair ? .readWrite : .readOnly)
            return try run(db, repair: repair)
        } catch let error as LibraryError {
            throw error
        } catch let error as SQLiteError {
            throw .unusableStore("cannot read the store's database: \(error.message)")
        } catch {
            throw .unusableStore("cannot check the store: \(error)")
        }
    }

    private struct AssetRow {
        let size: Int64
        /// Side files belong to one directory and are in no roll.
        let isSideFile: Bool
        var rollEntries = 0
        var recentlyDeletedEntries = 0
        /// A hidden asset is in Hidden/ instead of the roll.
        var hiddenEntries = 0
    }

    private func run(_ db: Database, repair: Bool) throws -> [Problem] {
        var problems: [Problem] = []
        let version = try Migrator.version(of: db)
        if version == 0 || version > Schema.migrator.latestVersion {
            throw LibraryError.unusableStore(version == 0
                ? "the store's database \(location.databasePath) is empty or not an albumfs database"
                : "the store has format \(version), newer than this albumfs knows (\(Schema.migrator.latestVersion))")
        }
        guard version == Schema.migrator.latestVersion else {
            return [Problem(description: "schema version \(version), this albumfs knows \(Schema.migrator.latestVersion) (mount migrates an older store)", repair: nil,
                            whyNotRepaired: "fsck checks only the current format: mount the store once to migrate it")]
        }
        for message in try db.quickCheck() {
            if message != "ok" {
                problems.append(Problem(description: "database: \(message)", repair: nil,
                                        whyNotRepaired: "SQLite cannot say which rows are right; restore library.sqlite from a backup"))
            }
        }

        // Pass 1: the database.
        var assets: [NodeID: AssetRow] = [:]
        for node in try db.nodesWithData() {
            assets[node.id] = AssetRow(size: node.size, isSideFile: node.isSideFile)
        }
        let deleted = Set(try db.deletedAssetIDs())
        let danglingEntries = try db.danglingEntries()
        for (parent, child) in danglingEntries {
            problems.append(Problem(description: "directory \(parent) has an entry for node \(child), which does not exist",
                                    repair: "remove the entry"))
        }
        // (A pending purge's facts outlive its node until the purge is done.)
        let orphanedFacts = try db.orphanedFacts()
        for id in orphanedFacts {
            problems.append(Problem(description: "facts of asset \(id), which does not exist", repair: "remove them"))
        }
        for child in try db.childIDs(of: FixedNode.cameraRoll) { assets[child]?.rollEntries += 1 }
        for child in try db.childIDs(of: FixedNode.recentlyDeleted) { assets[child]?.recentlyDeletedEntries += 1 }
        for child in try db.childIDs(of: FixedNode.hidden) { assets[child]?.hiddenEntries += 1 }
        // An edited asset's original is rightly in no directory.
        let originals = Set(try db.originalIDs())
        for id in originals where assets[id] == nil {
            problems.append(Problem(description: "original \(id) of an edited asset has no node", repair: nil,
                                    whyNotRepaired: "only a backup can bring the first version back"))
        }
        var withoutRollEntry: [NodeID] = []
        var withoutRecentlyDeletedEntry: [NodeID] = []
        for id in deleted where assets[id].map({ $0.isSideFile }) ?? true {
            problems.append(Problem(description: "node \(id) is listed as deleted but is no asset", repair: nil,
                                    whyNotRepaired: "which of the two rows is wrong is not known"))
        }
        for (id, row) in assets where !row.isSideFile && deleted.contains(id) {
            // A deleted asset is in Recently Deleted, once, and in no roll.
            if row.rollEntries != 0 {
                problems.append(Problem(description: "asset \(id) is deleted but still in the Camera Roll", repair: nil,
                                        whyNotRepaired: "whether it was being deleted or restored is not known"))
            }
            if row.recentlyDeletedEntries == 0 {
                withoutRecentlyDeletedEntry.append(id)
                problems.append(Problem(description: "deleted asset \(id) is not in Recently Deleted",
                                        repair: "add it to Recently Deleted as recovered-\(id)"))
            }
        }
        for (id, row) in assets where !row.isSideFile && !deleted.contains(id) && !originals.contains(id)
            && row.rollEntries + row.hiddenEntries != 1 {
            if row.rollEntries + row.hiddenEntries == 0 {
                withoutRollEntry.append(id)
                problems.append(Problem(description: "asset \(id) has no entry in the Camera Roll",
                                        repair: "add it to the Camera Roll as recovered-\(id)"))
            } else {
                problems.append(Problem(description: "asset \(id) is in the Camera Roll and Hidden \(row.rollEntries + row.hiddenEntries) times", repair: nil,
                                        whyNotRepaired: "which of its roll names to keep is not known, and unlinking a roll name deletes the asset"))
            }
        }

        // Pass 2: the content directory.
        let content = ContentStore(directory: location.contentPath)
        let pendingPurges = Set(try db.pendingPurges())
        let unfinishedWrites = Set(try db.unfinishedWrites())
        var seen = Set<NodeID>()
        var orphans: [String] = []
        var deletedData: [String] = []
        var sizeFromData: [(NodeID, Int64)] = []
        try content.forEachFile { path, id, size in
            if let id, pendingPurges.contains(id) {
                deletedData.append(path)
                problems.append(Problem(description: "asset \(id) was deleted but its data \(path) was not freed yet",
                                        repair: "free it"))
                return
            }
            guard let id, let row = assets[id] else {
                orphans.append(path)
                problems.append(Problem(description: "content file \(path) belongs to no asset",
                                        repair: "move it to \(location.root)/lost+found"))
                return
            }
            seen.insert(id)
            if size != row.size {
                // The data is the truth: its size keeps every byte there is (after
                // an interrupted write, or a row that promises bytes never written).
                let interrupted = unfinishedWrites.contains(id)
                sizeFromData.append((id, size))
                problems.append(Problem(
                    description: "asset \(id) records \(row.size) bytes but its data has \(size)"
                        + (interrupted ? " (a write was interrupted)" : ""),
                    repair: "set its size to \(size)"))
            }
        }
        let dataInDatabase = Set(try db.nodesWithDataInDatabase())
        // Evicted data is in the bucket (fsck --remote, planned, checks it there).
        let evicted = Set(try db.evictedAssets())
        for id in assets.keys where !seen.contains(id) && !dataInDatabase.contains(id) && !evicted.contains(id) {
            problems.append(Problem(description: "asset \(id) has no data (\(content.path(of: id)) is missing)", repair: nil,
                                    whyNotRepaired: "only a backup of that file can bring it back; removing the asset would drop its names and albums"))
        }

        if repair {
            for path in deletedData { unlink(path) }
            try db.transaction {
                for id in pendingPurges { try db.purgeDone(id) }
                for (id, _) in sizeFromData where !unfinishedWrites.contains(id) {
                    if let stamp = content.stamp(of: id) {
                        try db.adoptDataSize(id, size: stamp.size, modified: stamp.modified)
                    }
                }
                // As recovery at mount does: the data's size and mtime.
                for id in unfinishedWrites {
                    if let stamp = content.stamp(of: id) {
                        try db.adoptInterruptedWrite(id, size: stamp.size, modified: stamp.modified)
                    }
                    try db.endWrite(id)
                }
                for (parent, child) in danglingEntries {
                    try db.deleteEntries(in: parent, naming: child)
                }
                for id in withoutRollEntry {
                    let name = try db.freeName(in: FixedNode.cameraRoll, for: Array("recovered-\(id)".utf8))
                    try db.insertEntry(FixedNode.cameraRoll, name, id)
                }
                for id in orphanedFacts { try db.deleteFacts(id) }
                for id in withoutRecentlyDeletedEntry {
                    let name = try db.freeName(in: FixedNode.recentlyDeleted, for: Array("recovered-\(id)".utf8))
                    try db.insertEntry(FixedNode.recentlyDeleted, name, id)
                }
            }
            try moveToLostAndFound(orphans)
        }
        return problems
    }

    private func moveToLostAndFound(_ paths: [String]) throws {
        guard !paths.isEmpty else { return }
        let lostAndFound = location.root + "/lost+found"
        if mkdir(lostAndFound, 0o700) != 0 && errno != EEXIST { throw LibraryError(errno: errno) }
        for path in paths {
            let name = path.split(separator: "/").last.map(String.init) ?? "orphan"
            let destination = "\(lostAndFound)/\(name)-\(currentTime())"
            if Glibc.rename(path, destination) != 0 { throw LibraryError(errno: errno) }
        }
    }
}
