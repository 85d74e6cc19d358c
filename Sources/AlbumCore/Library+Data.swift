#if canImport(Glibc)
import Glibc
#endif
import SQLiteKit

/// An open asset: the descriptor of its content file. One per FUSE open.
public final class OpenFile: Sendable {
    public let id: NodeID
    public let descriptor: Int32
    public let isWritable: Bool
    /// A reader of data still coming from the bucket: its reads wait for
    /// their bytes (SEMANTICS.md § Remote storage).
    let download: Download?

    init(id: NodeID, descriptor: Int32, isWritable: Bool, download: Download? = nil) {
        self.id = id
        self.descriptor = descriptor
        self.isWritable = isWritable
        self.download = download
    }

    /// Whether its data is still arriving: then it must be read through the
    /// library (never handed to the kernel as a passthrough backing file).
    public var isArriving: Bool { download.map { $0.outcome != .installed } ?? false }
}

/// File data: open, read, write, flush, fsync, release.
extension Library {
    public func open(_ id: NodeID, writable: Bool, truncate: Bool) throws(LibraryError) -> OpenFile {
        if writable && isReadOnly { throw .readOnly }
        if writable { waitForFreedData() }
        let kind = try attributes(of: id).kind
        guard kind.hasData else { throw .isDirectory }
        if kind == .sideFile { try writeDataKeptInDatabase(id) }
        var arriving: (download: Download, descriptor: Int32?)?
        // Not evicted from its fetch until it is registered as open.
        holdData(id)
        defer { releaseData(id) }
        if kind == .asset {
            if writable { try fetchIfEvicted(id) } else { arriving = try download(of: id, reading: true) }
            noteOpened(id)
        }
        let descriptor: Int32
        do {
            if let arriving = arriving?.descriptor { descriptor = arriving } else { descriptor = try content.open(id, writable: writable) }
        } catch .missingData {
            // Purged while another handle had it open (its attributes came
            // from that handle): an open by its old inode, as through
            // /proc/PID/fd, finds nothing, not damage.
            throw try read({ db in try db.kind(of: id) }) == nil ? .notFound : .missingData(id)
        }
        let attributes: Attributes
        do {
            try pausePoints.reached(.openBeforeRegister)
            attributes = try register(id, descriptor: descriptor, writable: writable)
        } catch {
            close(descriptor)
            throw error
        }
        let file = OpenFile(id: id, descriptor: descriptor, isWritable: writable, download: arriving?.download)
        if writable && truncate && attributes.size != 0 {
            do {
                _ = try setAttributes(id, AttributeChanges(size: 0))
            } catch {
                try? release(file)
                throw error
            }
        }
        return file
    }

    /// A side file whose data albumfs kept in the database (the `.trashinfo`
    /// of an asset deleted with rm) gets its content file at its first open
    /// or truncate: from then on it is a file like any other.
    func writeDataKeptInDatabase(_ id: NodeID) throws(LibraryError) {
        guard try read({ db in try db.sideFileData(id) }) != nil else { return }
        let content = self.content
        try write { db in
            guard let data = try db.sideFileData(id), let row = try db.attributes(of: id) else { return }
            try content.create(id, contents: data, modified: row.modificationTime)
            try db.removeSideFileData(id)
        }
    }

    /// Opens an asset `createAsset` just made (already marked as being written).
    public func openCreated(_ attributes: Attributes) throws(LibraryError) -> OpenFile {
        let descriptor = try content.open(attributes.id, writable: true)
        let openFiles = self.openFiles
        try locked { _, held in
            openFiles.opened(attributes, writable: true, held)
            openFiles.setMarked(attributes.id, true, held)
        }
        return OpenFile(id: attributes.id, descriptor: descriptor, isWritable: true)
    }

    /// Seeds the open-file state of a new handle with the asset's live
    /// attributes, read in the same lock hold (a last release cannot come
    /// between the read and the seed); a handle that can write marks the
    /// asset first (before any byte can change, O_TRUNC included).
    private func register(_ id: NodeID, descriptor: Int32, writable: Bool) throws(LibraryError) -> Attributes {
        let openFiles = self.openFiles
        return try locked { db, held in
            guard let stored = try db.attributes(of: id) else { throw LibraryError.notFound }
            // Deleted assets stay readable and are otherwise read-only.
            if writable, try db.isUnchangeable(id) { throw LibraryError.notPermitted }
            let live = openFiles.overlay(stored, held)
            if writable && !openFiles.isMarked(id, held) {
                try Self.beginWrite(id, through: descriptor, modified: live.modificationTime, db)
            }
            openFiles.opened(live, writable: writable, held)
            if writable { openFiles.setMarked(id, true, held) }
            return live
        }
    }

    /// Hands `file`'s writes to the kernel (FUSE passthrough): they go into
    /// the content file without passing through `write`, so from now on the
    /// content file's size and mtime are taken as the asset's whenever its
    /// live state is read (getattr, listings, flush, release).
    public func writesBypassDaemon(_ file: OpenFile) {
        guard file.isWritable else { return }
        let openFiles = self.openFiles
        try? locked { _, held in openFiles.addDirectWriter(file.id, descriptor: file.descriptor, held) }
    }

    /// Marks `file`'s asset as being written (an `unfinished_writes` row)
    /// unless it is, under the database lock: a transaction only when the row
    /// is missing, and OpenFiles is touched only after it committed.
    func markBeingWritten(_ file: OpenFile) throws(LibraryError) {
        if isReadOnly { throw .readOnly }
        let openFiles = self.openFiles
        let id = file.id
        try locked { db, held in
            if !openFiles.isMarked(id, held) {
                // No row: purged while open, nothing to stamp.
                let live = try db.attributes(of: id).map { openFiles.overlay($0, held) }
                try Self.beginWrite(id, through: file.descriptor, modified: live?.modificationTime, db)
            }
            openFiles.setMarked(id, true, held)
        }
    }

    /// Commits the mark of a write (an `unfinished_writes` row), the data
    /// first taking the asset's live mtime through `descriptor`: a mount
    /// that finds the mark takes the mtime from the data
    /// (`ContentStore.setModificationTime`). Under the database lock.
    private static func beginWrite(_ id: NodeID, through descriptor: Int32, modified: Nanoseconds?,
                                   _ db: Database) throws {
        if let modified { try ContentStore.setModificationTime(of: descriptor, to: modified) }
        try db.transaction { try db.beginWrite(id) }
    }

    /// Runs `change` on the data of an open handle, with the asset marked
    /// for the whole of it: a flush that comes between the check and the
    /// data cannot take the mark (OpenFiles.beginWriting).
    func changingData<T>(_ file: OpenFile, _ change: () throws(LibraryError) -> T) throws(LibraryError) -> T {
        while true {
            switch openFiles.beginWriting(file.id) {
            case .started:
                defer { openFiles.endWriting(file.id) }
                try pausePoints.reached(.writeBeforeData)
                return try change()
            case .unmarked:
                // A flush took the mark but a handle writes on (a dup'ed descriptor).
                try markBeingWritten(file)
            case .notOpen:
                throw .notOpenForWriting
            }
        }
    }

    /// Reads up to `count` bytes at `offset` into `buffer`; returns how many.
    public func read(_ file: OpenFile, into buffer: UnsafeMutableRawPointer, count: Int, at offset: Int64) throws(LibraryError) -> Int {
        try file.download?.waitFor(offset..<(offset + Int64(count)))
        return try syscall { pread(file.descriptor, buffer, count, off_t(offset)) }
    }

    /// Writes `count` bytes at `offset` from `buffer`. No database work: the
    /// new size and times are kept in memory until the flush.
    public func write(_ file: OpenFile, from buffer: UnsafeRawPointer, count: Int, at offset: Int64) throws(LibraryError) -> Int {
        try write(file, count: count, at: offset) { descriptor throws(LibraryError) in
            var written = 0
            while written < count {
                let n = pwrite(descriptor, buffer + written, count - written, off_t(offset) + off_t(written))
                if n < 0 && errno == EINTR { continue }
                if n < 0 {
                    // A short write is a write: the error comes with the next one.
                    if written > 0 { return written }
                    throw LibraryError(errno: errno)
                }
                if n == 0 { break }
                written += n
            }
            return written
        }
    }

    /// Writes up to `count` bytes at `offset` through `transfer`, which moves
    /// the data into the content file's descriptor by whatever means the
    /// caller has (pwrite of a buffer, splice from a pipe) and returns the
    /// bytes written.
    public func write(_ file: OpenFile, count: Int, at offset: Int64,
                      transfer: (_ descriptor: Int32) throws(LibraryError) -> Int) throws(LibraryError) -> Int {
        if isReadOnly || !file.isWritable { throw isReadOnly ? .readOnly : .notOpenForWriting }
        let written = try changingData(file) { () throws(LibraryError) in try transfer(file.descriptor) }
        if written > 0 { wrote(file, endingAt: offset + Int64(written)) }
        return written
    }

    /// A write or an allocation changed `file`'s data up to `end`: no clock
    /// read, no syscall; the asset takes the data's mtime when its live
    /// state is next read (`OpenFiles.refresh`).
    func wrote(_ file: OpenFile, endingAt end: Int64) {
        openFiles.wrote(file.id, endingAt: end, through: file.descriptor)
    }

    /// Commits the size and times that writes changed. Runs at FLUSH (every
    /// close), so a closed file's metadata survives a killed daemon.
    public func flush(_ file: OpenFile) throws(LibraryError) {
        try commit(file) { $0.flushing(file.id, writable: file.isWritable, $1) }
    }

    /// Commits what `take` says under the database lock, in one transaction
    /// (nothing at all when there is nothing to commit), and tells OpenFiles
    /// in the same lock hold; `closing`: then forgets a file nobody has open.
    private func commit(_ file: OpenFile, closing: Bool = false,
                        _ take: (OpenFiles, borrowing DatabaseHeld) -> OpenFiles.Commit) throws(LibraryError) {
        // Before the commit that may queue its upload: the uploader must never
        // see the queued file before the write that settling waits for.
        if file.isWritable { remoteSync.withLock { $0 }?.noteWrite() }
        try commit(file.id, closing: closing, take)
    }

    private func commit(_ id: NodeID, closing: Bool,
                        _ take: (OpenFiles, borrowing DatabaseHeld) -> OpenFiles.Commit) throws(LibraryError) {
        let (openFiles, pausePoints) = (self.openFiles, self.pausePoints)
        try locked { db, held in
            defer { if closing { openFiles.forgetIfClosed(id, held) } }
            let commit = take(openFiles, held)
            guard !commit.isEmpty else { return }
            do {
                try db.transaction {
                    if let a = commit.snapshot?.attributes {
                        try db.writeContentState(a.id, size: a.size, modified: a.modificationTime, changed: a.changeTime)
                    }
                    if commit.unmark { try db.endWrite(id) }
                    try pausePoints.reached(.commitOfData)
                }
            } catch {
                if commit.unmark { openFiles.setMarked(id, true, held) }
                if closing { openFiles.hasUnsettled.store(true, ordering: .relaxed) }
                throw error
            }
            if let snapshot = commit.snapshot { openFiles.committed(snapshot, held) }
        }
        wakeRemoteSync()
    }

    /// Makes the file's data and metadata durable against power loss: its
    /// data, its content file's directory entry, its row (through the WAL).
    public func synchronize(_ file: OpenFile, dataOnly: Bool) throws(LibraryError) {
        try syscall { dataOnly ? fdatasync(file.descriptor) : fsync(file.descriptor) }
        try content.synchronizeDirectory(of: file.id)
        if !isReadOnly {
            try commit(file) { $0.synchronizing(file.id, $1) }
            try synchronizeDatabase()
        }
    }

    /// Syncs the WAL, so every committed transaction survives a power loss
    /// (the connection runs with synchronous=NORMAL, which does not).
    public func synchronizeDatabase() throws(LibraryError) {
        let wal = Glibc.open(location.walPath, O_RDONLY | O_CLOEXEC)
        guard wal >= 0 else { return }  // no WAL: everything is in the main file
        defer { close(wal) }
        try syscall { fsync(wal) }
    }

    /// The last close of a handle: commit what is left (the live state if it
    /// changed, the mark when the last writer goes) and drop the descriptor.
    /// A commit that fails (a full disk) loses nothing: the live state and
    /// the mark stay in OpenFiles (`stat` still shows the size written), and
    /// are committed by the next release that succeeds, the file's next
    /// close, or the next mount's recovery, which finds the mark. It does not
    /// spend the store's reserve: that is kept for the deletes that empty a
    /// full library (a release that took it, while `cp` fills the disk, left
    /// rm nothing to free space with).
    public func release(_ file: OpenFile) throws(LibraryError) {
        try releaseCommitting(file)
        if openFiles.hasUnsettled.load(ordering: .relaxed) { try? settleReleases() }
        // A file closed may be evicted now (one fetched back, over the cache bound).
        if options.cacheSize != nil { wakeRemoteSync() }
    }

    /// Commits what failed last releases still owe (`OpenFiles.settling`).
    func settleReleases() throws(LibraryError) {
        let openFiles = self.openFiles
        let ids = try locked { _, held in openFiles.unsettled(held) }
        for id in ids {
            try commit(id, closing: true) { $0.settling(id, $1) }
        }
    }

    private func releaseCommitting(_ file: OpenFile) throws(LibraryError) {
        defer { close(file.descriptor) }
        if isReadOnly {
            let openFiles = self.openFiles
            try locked { _, held in
                _ = openFiles.closing(file.id, writable: file.isWritable, descriptor: file.descriptor, held)
                openFiles.forgetIfClosed(file.id, held)
            }
            return
        }
        guard file.isWritable, let indexer else {
            try commit(file, closing: true) { $0.closing(file.id, writable: file.isWritable, descriptor: file.descriptor, $1) }
            return
        }
        // Its content may have changed: read what it says again.
        try indexer.announcing { () throws(LibraryError) in
            try commit(file, closing: true) { $0.closing(file.id, writable: true, descriptor: file.descriptor, $1) }
            indexer.enqueue(file.id, of: self)
        }
    }
}
