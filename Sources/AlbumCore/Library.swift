#if canImport(Glibc)
import Glibc
#endif
import SQLiteKit
import Synchronization

/// A photo library on an open store: the model's operations (lookup, list,
/// create, link, unlink, rename, attributes, data) with no FUSE in sight.
///
/// Concurrency: one SQLite connection behind `database`; every metadata
/// operation takes that lock for one short transaction. File data is read and
/// written with pread/pwrite on per-handle descriptors, outside any lock.
/// Lock order: `database` may be held while taking `openFiles`' lock, never
/// the other way round.
public final class Library: Sendable {
    public let location: StoreLocation
    public let content: ContentStore
    public let isReadOnly: Bool
    let database: Mutex<Database>
    let openFiles = OpenFiles()
    let reserve: SpaceReserve
    /// The largest file the content directory's filesystem holds: a bigger
    /// size is refused before anything changes (EFBIG, as ext4 does).
    let largestFileSize: Int64

    /// Opens the store at `location` (creating it when none is there only if
    /// `create`). The first opener owns the fixed directories. Throws
    /// `.unusableStore` with a one-line reason when the store cannot be used.
    public init(location: StoreLocation, owner: Caller, readOnly: Bool = false, create: Bool = false) throws(LibraryError) {
        self.location = location
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
        self.database = Mutex(db)
        self.reserve = reserve
        self.largestFileSize = readOnly ? Int64.max : content.largestFileSize()
        if !readOnly { reserve.take() }
    }

    // MARK: running transactions

    /// Runs a read under the database lock.
    func read<T: Sendable>(_ body: (Database) throws -> T) throws(LibraryError) -> T {
        try database.withLock { db throws(LibraryError) in
            try mappingErrors { try body(db) }
        }
    }

    /// Runs a change as one immediate transaction under the database lock.
    /// A change that frees space (`freesSpace`) may use the store's reserve:
    /// on a full disk it is given up and the change retried once, so that a
    /// full library can always be emptied.
    func write<T: Sendable>(freesSpace: Bool = false, _ body: (Database) throws -> T) throws(LibraryError) -> T {
        if isReadOnly { throw .readOnly }
        func attempt() throws(LibraryError) -> T {
            try database.withLock { db throws(LibraryError) in
                try mappingErrors { try db.transaction { try body(db) } }
            }
        }
        do {
            return try attempt()
        } catch .noSpace where freesSpace && reserve.release() {
            return try attempt()
        }
    }

    // MARK: reading the tree

    public func attributes(of id: NodeID) throws(LibraryError) -> Attributes {
        let stored = try read { db in try db.attributes(of: id) }
        if let stored { return openFiles.overlay(stored) }
        // Deleted while open: fstat on the open file still works.
        if let live = openFiles.lastKnown(id) { return live }
        throw .notFound
    }

    public func lookup(_ parent: NodeID, _ name: Name) throws(LibraryError) -> Attributes {
        if name.count > Names.maxLength { throw .nameTooLong }
        let found = try read { db in try db.lookup(parent, name) }
        guard let found else { throw .notFound }
        return openFiles.overlay(found)
    }

    /// Up to `limit` entries of a directory after `cookie` (0: from the start).
    public func list(_ directory: NodeID, after cookie: Int64, limit: Int) throws(LibraryError) -> [DirectoryEntry] {
        let rows = try read { db -> [(row: Int64, name: Name, attributes: Attributes)]? in
            guard let kind = try db.kind(of: directory) else { return nil }
            guard kind.isDirectory else { throw LibraryError.notDirectory }
            return try db.listing(directory, afterRow: cookie, limit: limit)
        }
        guard let rows else { throw .notFound }
        let attributes = openFiles.overlay(rows.map(\.attributes))
        return zip(rows, attributes).map { DirectoryEntry(name: $0.name, attributes: $1, cookie: $0.row) }
    }

    /// The parent of a directory, for `..` (the root is its own parent).
    public func parent(ofDirectory id: NodeID) throws(LibraryError) -> NodeID {
        try read { db in try db.parent(ofDirectory: id) } ?? FixedNode.root
    }

    /// The directories that show an asset: the roll and every album holding it.
    public func directories(showing id: NodeID) throws(LibraryError) -> [NodeID] {
        try read { db in try db.entries(of: id).map(\.directory) }
    }

    /// The store's free space; the file counts are assets stored.
    public func statistics() throws(LibraryError) -> FilesystemStatistics {
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
