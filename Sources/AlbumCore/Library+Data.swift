#if canImport(Glibc)
import Glibc
#endif

/// An open asset: the descriptor of its content file. One per FUSE open.
public final class OpenFile: Sendable {
    public let id: NodeID
    public let descriptor: Int32
    public let isWritable: Bool

    init(id: NodeID, descriptor: Int32, isWritable: Bool) {
        self.id = id
        self.descriptor = descriptor
        self.isWritable = isWritable
    }
}

/// File data: open, read, write, flush, fsync, release.
extension Library {
    public func open(_ id: NodeID, writable: Bool, truncate: Bool) throws(LibraryError) -> OpenFile {
        if writable && isReadOnly { throw .readOnly }
        let attributes = try attributes(of: id)
        guard attributes.kind == .asset else { throw .isDirectory }
        let descriptor = try content.open(id, writable: writable)
        guard writable else {
            openFiles.opened(attributes, writable: false)
            return OpenFile(id: id, descriptor: descriptor, isWritable: false)
        }
        do {
            // Marked before any byte can change (O_TRUNC included).
            try markBeingWritten(id) { $0.opened(attributes, writable: true) }
        } catch {
            close(descriptor)
            throw error
        }
        let file = OpenFile(id: id, descriptor: descriptor, isWritable: true)
        if truncate && attributes.size != 0 {
            do {
                _ = try setAttributes(id, AttributeChanges(size: 0))
            } catch {
                try? release(file)
                throw error
            }
        }
        return file
    }

    /// Opens an asset `createAsset` just made (already marked as being written).
    public func openCreated(_ attributes: Attributes) throws(LibraryError) -> OpenFile {
        let descriptor = try content.open(attributes.id, writable: true)
        openFiles.opened(attributes, writable: true)
        openFiles.setMarked(attributes.id, true)
        return OpenFile(id: attributes.id, descriptor: descriptor, isWritable: true)
    }

    /// Hands `file`'s writes to the kernel (FUSE passthrough): they go into
    /// the content file without passing through `write`, so from now on the
    /// content file's size and mtime are taken as the asset's whenever its
    /// live state is read (getattr, listings, flush, release).
    public func writesBypassDaemon(_ file: OpenFile) {
        if file.isWritable { openFiles.addDirectWriter(file.id, descriptor: file.descriptor) }
    }

    /// Marks `id` as being written (an `unfinished_writes` row) unless it is,
    /// then runs `registering` on OpenFiles: both under the database lock, so
    /// a concurrent last release cannot clear the mark between the check and
    /// the registration. A transaction only when the row is missing, and
    /// OpenFiles is touched only after it committed.
    func markBeingWritten(_ id: NodeID, registering: (OpenFiles) -> Void = { _ in }) throws(LibraryError) {
        if isReadOnly { throw .readOnly }
        let openFiles = self.openFiles
        try database.withLock { db throws(LibraryError) in
            if !openFiles.isMarked(id) {
                try mappingErrors { try db.transaction { try db.beginWrite(id) } }
            }
            registering(openFiles)
            openFiles.setMarked(id, true)
        }
    }

    /// Reads up to `count` bytes at `offset` into `buffer`; returns how many.
    public func read(_ file: OpenFile, into buffer: UnsafeMutableRawPointer, count: Int, at offset: Int64) throws(LibraryError) -> Int {
        try syscall { pread(file.descriptor, buffer, count, off_t(offset)) }
    }

    /// Writes `count` bytes at `offset` from `buffer`. No database work: the
    /// new size and times are kept in memory until the flush.
    public func write(_ file: OpenFile, from buffer: UnsafeRawPointer, count: Int, at offset: Int64) throws(LibraryError) -> Int {
        try write(file, count: count, at: offset) { descriptor in
            var written = 0
            while written < count {
                let n = pwrite(descriptor, buffer + written, count - written, off_t(offset) + off_t(written))
                if n < 0 && errno == EINTR { continue }
                if n < 0 { return written > 0 ? written : -Int(errno) }
                if n == 0 { break }
                written += n
            }
            return written
        }
    }

    /// Writes up to `count` bytes at `offset` through `transfer`, which moves
    /// the data into the content file's descriptor by whatever means the
    /// caller has (pwrite of a buffer, splice from a pipe) and returns the
    /// bytes written or a negated errno.
    public func write(_ file: OpenFile, count: Int, at offset: Int64,
                      transfer: (_ descriptor: Int32) -> Int) throws(LibraryError) -> Int {
        if isReadOnly || !file.isWritable { throw isReadOnly ? .readOnly : .io(EBADF) }
        if !openFiles.isMarked(file.id) {
            // A flush cleared the mark but a handle wrote on (a dup'ed descriptor).
            try markBeingWritten(file.id)
        }
        let written = transfer(file.descriptor)
        if written < 0 { throw LibraryError(errno: Int32(-written)) }
        if written > 0 {
            openFiles.wrote(file.id, endingAt: offset + Int64(written), now: currentTime())
        }
        return written
    }

    /// Commits the size and times that writes changed. Runs at FLUSH (every
    /// close), so a closed file's metadata survives a killed daemon.
    public func flush(_ file: OpenFile) throws(LibraryError) {
        try commit(file) { $0.flushing(file.id, writable: file.isWritable) }
    }

    /// Commits what `take` says under the database lock, in one transaction;
    /// nothing at all when there is nothing to commit.
    private func commit(_ file: OpenFile, _ take: @escaping (OpenFiles) -> OpenFiles.Commit) throws(LibraryError) {
        let openFiles = self.openFiles
        let commit = try database.withLock { db throws(LibraryError) -> OpenFiles.Commit in
            let commit = take(openFiles)
            guard !commit.isEmpty else { return commit }
            do throws(LibraryError) {
                try mappingErrors {
                    try db.transaction {
                        if let a = commit.snapshot?.attributes {
                            try db.writeContentState(a.id, size: a.size, modified: a.modificationTime, changed: a.changeTime)
                        }
                        if commit.unmark { try db.endWrite(file.id) }
                    }
                }
            } catch {
                if commit.unmark { openFiles.setMarked(file.id, true) }
                throw error
            }
            return commit
        }
        if let snapshot = commit.snapshot { openFiles.committed(snapshot) }
    }

    /// Makes the file's data and metadata durable against power loss: its
    /// data, its content file's directory entry, its row (through the WAL).
    public func synchronize(_ file: OpenFile, dataOnly: Bool) throws(LibraryError) {
        try syscall { dataOnly ? fdatasync(file.descriptor) : fsync(file.descriptor) }
        try content.synchronizeDirectory(of: file.id)
        if !isReadOnly {
            try commit(file) { $0.synchronizing(file.id) }
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
    public func release(_ file: OpenFile) throws(LibraryError) {
        defer {
            close(file.descriptor)
            openFiles.forgetIfClosed(file.id)
        }
        if isReadOnly {
            _ = openFiles.closing(file.id, writable: file.isWritable, descriptor: file.descriptor)
            return
        }
        try commit(file) { $0.closing(file.id, writable: file.isWritable, descriptor: file.descriptor) }
    }
}
