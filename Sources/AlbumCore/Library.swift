#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import SQLiteKit
import Synchronization

/// A photo library on an open store: the model's operations (lookup, list,
/// create, link, unlink, rename, attributes, data) with no FUSE in sight.
///
/// Concurrency: one SQLite connection behind `database`; every metadata
/// operation takes that lock for one short transaction. File data is read and
/// written with pread/pwrite on per-handle descriptors, outside any lock.
/// Lock order: `database` may be held while taking `openFiles`' lock, never
/// the other way round (OpenFiles' lock is private and nothing runs under
/// it but OpenFiles' own code). `OpenFiles`' state changes, and its overlay
/// on rows, only under the database lock: those methods take a
/// `DatabaseHeld`, which only the lock helpers below make.
/// Proof that the database lock is held. Made only by Library's lock
/// helpers, inside the lock, and lent (`borrowing`) to the code that runs
/// there; being ~Copyable it cannot be kept past it.
struct DatabaseHeld: ~Copyable {
    fileprivate init() {}
}

public final class Library: Sendable {
    public let location: StoreLocation
    public let content: ContentStore
    public let isReadOnly: Bool
    public let options: LibraryOptions
    let database: BlockingLock<Database>
    /// The database connection's commits, counted without its lock.
    private let commits: CommitCounter
    let openFiles: OpenFiles
    /// Where tests step in to run a race's other half (PausePoints).
    let pausePoints: PausePoints
    let reserve: SpaceReserve
    /// Where purged nodes' data is freed, after their commit.
    let deferredFrees: DeferredFrees
    /// Reads assets' facts in the background (nil without a facts reader or read-only).
    let indexer: Indexer?
    /// Where changes made outside any request go (the facts of an asset read
    /// anew: names in the views), for the kernel's caches; set by the mount.
    /// Delivered under this lock (so that clearing it waits for a delivery
    /// under way), which sleeps, never spins: a delivery may wait up to the
    /// Invalidator's bound.
    let backgroundChanges = BlockingLock<(@Sendable (ChangeSet) -> Void)?>(nil)
    /// The store's remote, as its database says (nil: none).
    public let remote: RemoteConfiguration?
    /// Uploads to it and deletes from it, once the mount attaches a backend.
    let remoteSync = Mutex<RemoteSync?>(nil)
    /// The mount's lease on the bucket (nil: none asked for, as by `remote
    /// attach` or a test): nothing is written to the bucket unless it is held.
    let lease = Mutex<Lease?>(nil)
    /// Evicted assets whose data is coming back from the bucket now
    /// (`user.albumfs.storage`: downloading). Changed under the database lock.
    let downloads = BlockingLock<[NodeID: Download]>([:])
    /// Held by a second device's refresh (refreshMirror) from its look at
    /// the bucket to its end: one at a time.
    let refreshing = BlockingLock<Void>(())
    /// Every download's worker, from its start to its end: the end of a
    /// mount waits for them (`stopRemoteSync`).
    let downloadWorkers = DispatchGroup()
    /// Assets an open or a truncate is bringing in or about to use (from
    /// before its fetch to its registration or its cut): never evicted then
    /// (counts; `holdData`). Only with a remote.
    let dataHeld = Mutex<[NodeID: Int]>([:])
    /// When each asset was last opened this mount (a counter): eviction's order.
    let lastOpened = Mutex<(clock: UInt64, order: [NodeID: UInt64])>((0, [:]))
    /// The change count (`changeCount`) the bucket's newest snapshot holds
    /// every change up to; nil: not known to hold them (SEMANTICS.md §
    /// Surviving the machine).
    let snapshotted = Mutex<UInt64?>(nil)
    /// The largest file the content directory's filesystem holds: a bigger
    /// size is refused before anything changes (EFBIG, as ext4 does).
    let largestFileSize: Int64

    /// Opens the store at `location` (creating it when none is there only if
    /// `create`). The first opener owns the fixed directories. Throws
    /// `.unusableStore` with a one-line reason when the store cannot be used.
    public init(location: StoreLocation, owner: Caller, readOnly: Bool = false, create: Bool = false,
                options: LibraryOptions = LibraryOptions()) throws(LibraryError) {
        self.location = location
        self.options = options
        self.content = ContentStore(directory: location.contentPath)
        self.isReadOnly = readOnly
        let opener = StoreOpener(location: location, owner: owner, readOnly: readOnly, create: create)
        let reserve = SpaceReserve(location: location)
        let db: Database
        let full = LibraryError.unusableStore("the disk of the store \(location.root) is full")
        do {
            db = try opener.open()
        } catch .noSpace {
            // A full disk must not keep a library from opening: deleting is how
            // space comes back. The reserve makes the room to open it.
            guard reserve.release() else { throw full }
            do { db = try opener.open() } catch .noSpace { throw full }
        }
        self.commits = db.commits
        self.remote = try? db.remoteConfiguration()
        self.database = BlockingLock(db)
        self.reserve = reserve
        let (content, pausePoints, openFiles) = (self.content, PausePoints(), OpenFiles())
        self.pausePoints = pausePoints
        self.openFiles = openFiles
        self.deferredFrees = DeferredFrees { ids in
            try? pausePoints.reached(.freeingData)
            // A purged asset no handle has open is emptied before its name
            // goes: its space is free at once even while a background reader
            // of ours (the facts worker, a hash) still holds the file. One
            // that a handle has open keeps its data until that closes, as on
            // any filesystem (no handle can open it any more: its row is gone).
            for id in ids { content.remove(id, emptyingFirst: !openFiles.isOpen(id)) }
            reserve.take()
        }
        self.largestFileSize = readOnly ? Int64.max : content.largestFileSize()
        self.indexer = readOnly ? nil : options.factsReader.map { Indexer(reader: $0) }
        if !readOnly {
            if remote != nil {
                // What this open changes is in no snapshot yet; what the last mount left may be.
                let saved = (try? write { db in try db.takeSnapshotSaved() }) ?? false
                if saved { snapshotted.withLock { $0 = db.commits.current } }
            }
            reserve.take()
            // What expired while the store was not mounted goes now.
            _ = try? purgeExpired()
            indexer?.indexMissing(of: self)
        }
    }

    /// A number that has risen by the time any change to the library, a
    /// request's or one made in the background, is visible: read it before
    /// a query, and the same number later means that nothing the query saw
    /// has changed since. (It rises with every commit, whatever it changed.)
    public var changeCount: UInt64 { commits.current }

    /// Sets where changes made outside any request are sent (see backgroundChanges).
    public func onBackgroundChanges(_ deliver: (@Sendable (ChangeSet) -> Void)?) {
        backgroundChanges.withLock { $0 = deliver }
    }

    /// A library ends with its purged data freed (a store is never left
    /// with frees still running behind its next opener).
    deinit {
        deferredFrees.wait()
    }

    // MARK: running transactions

    /// Runs `body` under the database lock, with the proof that it is held.
    func locked<T: Sendable>(_ body: (Database, borrowing DatabaseHeld) throws -> T) throws(LibraryError) -> T {
        try database.withLock { db throws(LibraryError) in
            let held = DatabaseHeld()
            return try mappingErrors { try body(db, held) }
        }
    }

    /// `write`, with the proof of the lock lent to `body` and to `committed`,
    /// which runs after the commit under the same lock hold: where OpenFiles
    /// takes in what was committed, before anyone else can look.
    func write<T: Sendable>(freesSpace: Bool = false, _ body: (Database, borrowing DatabaseHeld) throws -> T,
                            committed: (T, borrowing DatabaseHeld) -> Void) throws(LibraryError) -> T {
        if isReadOnly { throw .readOnly }
        func attempt() throws(LibraryError) -> T {
            try database.withLock { db throws(LibraryError) in
                let held = DatabaseHeld()
                let result = try mappingErrors { try db.transaction { try body(db, held) } }
                committed(result, held)
                return result
            }
        }
        do {
            return try attempt()
        } catch .noSpace where freesSpace && reserve.release() {
            return try attempt()
        }
    }

    /// Runs a read under the database lock.
    func read<T: Sendable>(behindRequests: Bool = false, _ body: (Database) throws -> T) throws(LibraryError) -> T {
        try database.withLock(behindOthers: behindRequests) { db throws(LibraryError) in
            try mappingErrors { try body(db) }
        }
    }

    /// Runs a change as one immediate transaction under the database lock.
    /// A change that frees space (`freesSpace`) may use the store's reserve:
    /// on a full disk it is given up and the change retried once, so that a
    /// full library can always be emptied.
    /// `rolledBack` runs when the transaction does not commit (a failed
    /// COMMIT included), in the same lock hold: undoing what it did outside
    /// the database there means nobody can have taken it over meanwhile.
    /// Background work writes `behindRequests` (BlockingLock's `behindOthers`).
    func write<T: Sendable>(freesSpace: Bool = false, behindRequests: Bool = false, _ body: (Database) throws -> T,
                            rolledBack: () -> Void = {}) throws(LibraryError) -> T {
        if isReadOnly { throw .readOnly }
        func attempt() throws(LibraryError) -> T {
            try database.withLock(behindOthers: behindRequests) { db throws(LibraryError) in
                do throws(LibraryError) {
                    return try mappingErrors { try db.transaction { try body(db) } }
                } catch {
                    rolledBack()
                    throw error
                }
            }
        }
        do {
            return try attempt()
        } catch .noSpace where freesSpace && reserve.release() {
            return try attempt()
        }
    }

    // MARK: reading the tree

    /// The row and the open-file state are read under one lock hold: a last
    /// release (which commits and forgets the live state) cannot come between.
    public func attributes(of id: NodeID) throws(LibraryError) -> Attributes {
        try pausePoints.reached(.readingAttributes)
        let openFiles = self.openFiles
        return try locked { db, held in
            if let node = VirtualNode(id) { return try Self.attributes(of: node, db) }
            if let stored = try db.attributes(of: id) { return openFiles.overlay(stored, held) }
            // Deleted while open: fstat on the open file still works.
            if let live = openFiles.lastKnown(id, held) { return live }
            throw LibraryError.notFound
        }
    }

    /// The node `name` in `parent`. In the root, `.Trash-UID` is found too
    /// (it is never listed), made on the first lookup by that uid.
    public func lookup(_ parent: NodeID, _ name: Name, by caller: Caller? = nil) throws(LibraryError) -> Attributes {
        if name.count > Names.maxLength { throw .nameTooLong }
        let (openFiles, writable) = (self.openFiles, !isReadOnly)
        let (found, infosToWrite) = try locked { db, held -> (Attributes?, Bool) in
            guard let view = ComputedViews.view(serving: parent) else {
                if let found = try db.lookup(parent, name) { return (openFiles.overlay(found, held), false) }
                return (nil, try writable && db.trash(withUnwrittenInfosIn: parent) != nil)
            }
            switch try view.lookup(db, in: parent, name) {
            case .asset(let attributes): return (openFiles.overlay(attributes, held), false)
            case .directory(let node): return (try Self.attributes(of: node, db), false)
            case nil: return (nil, false)
            }
        }
        if let found { return found }
        if parent == FixedNode.root, let uid = Self.trashOwner(name) {
            return try trash(of: uid, lookedUpBy: caller)
        }
        if infosToWrite {
            // Looked up again even if another request wrote them meanwhile.
            try writeUnwrittenTrashInfos(in: parent)
            return try lookup(parent, name, by: caller)
        }
        throw .notFound
    }

    /// Writes the `.trashinfo` files still to write in `directory`, a trash's
    /// info/ (Mutation.writeUnwrittenTrashInfos). A read-only library never
    /// asks, and shows none of them.
    private func writeUnwrittenTrashInfos(in directory: NodeID) throws(LibraryError) {
        _ = try mutate(by: Caller(uid: 0, gid: 0)) { m in try m.writeUnwrittenTrashInfos(in: directory) }
    }

    /// Up to `limit` entries of a directory after `cookie` (0: from the start).
    public func list(_ directory: NodeID, after cookie: Int64, limit: Int) throws(LibraryError) -> [DirectoryEntry] {
        let (openFiles, writable) = (self.openFiles, !isReadOnly)
        let (entries, infosToWrite) = try locked { db, held -> ([DirectoryEntry]?, Bool) in
            if let view = ComputedViews.view(serving: directory) {
                if let node = VirtualNode(directory), try !view.exists(db, node) { return (nil, false) }
                let root = try Self.rootAttributes(db)
                return (try view.list(db, directory, after: cookie, limit: limit).map { entry in
                    switch entry.child {
                    case .asset(let attributes):
                        return DirectoryEntry(name: entry.name, attributes: openFiles.overlay(attributes, held), cookie: entry.cookie)
                    case .directory(let node):
                        return DirectoryEntry(name: entry.name, attributes: ComputedViews.attributes(of: node, root: root), cookie: entry.cookie)
                    }
                }, false)
            }
            guard let kind = try db.kind(of: directory) else { return (nil, false) }
            guard kind.isDirectory else { throw LibraryError.notDirectory }
            if cookie == 0, kind == .trashInfo, writable, try db.trash(withUnwrittenInfosIn: directory) != nil { return (nil, true) }
            let rows = try db.listing(directory, afterRow: cookie, limit: limit)
            let attributes = openFiles.overlay(rows.map(\.attributes), held)
            return (zip(rows, attributes).map { DirectoryEntry(name: $0.name, attributes: $1, cookie: $0.row) }, false)
        }
        if infosToWrite {
            try writeUnwrittenTrashInfos(in: directory)
            return try list(directory, after: cookie, limit: limit)
        }
        guard let entries else { throw .notFound }
        return entries
    }

    /// A view's directory that is not a node, while it shows anything.
    static func attributes(of node: VirtualNode, _ db: Database) throws -> Attributes {
        guard let view = ComputedViews.view(serving: node.id), try view.exists(db, node) else { throw LibraryError.notFound }
        return ComputedViews.attributes(of: node, root: try rootAttributes(db))
    }

    private static func rootAttributes(_ db: Database) throws -> Attributes {
        guard let root = try db.attributes(of: FixedNode.root) else { throw LibraryError.inconsistent("the root has no node") }
        return root
    }

    /// Whether `directory`'s entries are computed: the kernel must not cache them.
    public static func isComputed(_ directory: NodeID) -> Bool {
        ComputedViews.view(serving: directory) != nil
    }

    /// The parent of a directory, for `..` (the root is its own parent).
    public func parent(ofDirectory id: NodeID) throws(LibraryError) -> NodeID {
        if let node = VirtualNode(id) { return node.parent }
        return try read { db in try db.parent(ofDirectory: id) } ?? FixedNode.root
    }

    /// The directories that show an asset: the roll and every album holding it.
    public func directories(showing id: NodeID) throws(LibraryError) -> [NodeID] {
        try read { db in try db.entries(of: id).map(\.directory) }
    }

    /// The store's free space; the file counts are assets stored.
    public func statistics() throws(LibraryError) -> FilesystemStatistics {
        waitForFreedData()
        var info = statvfs()
        try syscall { statvfs(location.root, &info) }
        let assets = UInt64(try read { db in try db.assetCount() })
        return FilesystemStatistics(
            blockSize: UInt(info.f_frsize),
            blocks: UInt64(info.f_blocks), freeBlocks: UInt64(info.f_bfree),
            availableBlocks: UInt64(info.f_bavail),
            files: assets + UInt64(info.f_ffree), freeFiles: UInt64(info.f_ffree))
    }
}
