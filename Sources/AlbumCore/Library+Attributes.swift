/// setattr: mode, owner, size and times, on any node.
///
/// A size change touches the data, so it follows the write protocol: the
/// asset is marked as being written in the transaction that commits the new
/// size, the open-file state takes the new size and a pin on the mark in
/// the same lock hold (a flush or last release after it neither commits the
/// old size nor takes the mark), the data is cut after the commit, and the
/// mark goes with the pin if no handle can write. A crash in between leaves a mark, and the next
/// mount takes the size from the data: before or after, never a row that
/// promises bytes the data does not have. A size the content directory's
/// filesystem cannot hold is refused before anything changes (EFBIG), and a
/// cut that fails puts the row back as it was: a failed call changes nothing.
///
/// Set-ID bits go as Linux takes them (see SetIDBits): a chown clears them,
/// and a size change does when the kernel says the caller lacks CAP_FSETID
/// (`dropsSetID`: FATTR_KILL_SUIDGID, under FUSE_HANDLE_KILLPRIV_V2).
extension Library {
    public func setAttributes(_ id: NodeID, _ changes: AttributeChanges, by caller: Caller = Caller(uid: 0, gid: 0),
                              dropsSetID: Bool = false) throws(LibraryError) -> Attributes {
        if try isVirtualDirectory(id) { throw .notPermitted }
        let openFiles = self.openFiles
        let content = self.content
        // A size change: not evicted between its fetch and its cut.
        let cuts = changes.size != nil
        if cuts { holdData(id) }
        defer { if cuts { releaseData(id) } }
        if cuts {
            waitForFreedData()
            try writeDataKeptInDatabase(id)
            try fetchIfEvicted(id)
        }
        let largestFileSize = self.largestFileSize
        // Shrinking a file frees space: it may use the reserve.
        let (previous, result) = try write(freesSpace: changes.size != nil, { db, held -> (Attributes, Attributes) in
            guard let stored = try db.attributes(of: id) else { throw LibraryError.notFound }
            if try db.isUnchangeable(id) { throw LibraryError.notPermitted }
            // Start from the live state: unflushed writes must not be lost.
            let previous = openFiles.overlay(stored, held)
            var a = previous
            let now = options.now()
            if let mode = changes.mode {
                a.mode = mode & 0o7777
            } else {
                if changes.isChown { a.mode &= ~SetIDBits.droppedByChown(previous, by: caller) }
                if changes.size != nil && dropsSetID { a.mode &= ~SetIDBits.droppedByWriting(previous, by: caller) }
            }
            if let uid = changes.uid { a.uid = uid }
            if let gid = changes.gid { a.gid = gid }
            if let size = changes.size {
                guard a.kind.hasData else { throw LibraryError.isDirectory }
                guard size >= 0 else { throw LibraryError.invalidArgument }
                guard size <= largestFileSize else { throw LibraryError.fileTooLarge }
                if !openFiles.isMarked(id, held) { try db.beginWrite(id) }
                a.size = size
                a.modificationTime = now
            }
            switch changes.accessTime {
            case .now: a.accessTime = now
            case .set(let t): a.accessTime = t
            case nil: break
            }
            switch changes.modificationTime {
            case .now: a.modificationTime = now
            case .set(let t): a.modificationTime = t
            case nil: break
            }
            a.changeTime = now
            try db.writeAttributes(a)
            return (previous, a)
        }, committed: { committed, held in
            // The live state takes the new attributes in the commit's lock
            // hold, so a flush or release after it never commits the old
            // size; a size change pins the mark until its cut is done.
            let (_, result) = committed
            openFiles.replace(with: result, held)
            if changes.size != nil { openFiles.pin(result, held) }
            // The data carries the mtime (a size change's, after its cut).
            if changes.modificationTime != nil && changes.size == nil && result.kind.hasData {
                Self.stampData(id, modified: result.modificationTime, content, openFiles, held)
            }
        })
        // A new size or modification time may change what the asset shows
        // (its data; the month of an asset with no capture date).
        let reread = result.kind == .asset && (changes.size != nil || changes.modificationTime != nil)
        guard let size = changes.size else {
            if reread { indexer?.enqueue(id, of: self) }
            return result
        }
        try pausePoints.reached(.setAttributesBeforeCut)
        do {
            try content.truncate(id, to: size)
        } catch {
            try? restore(previous)
            try unpin(id, stamping: previous.modificationTime)
            throw error
        }
        try unpin(id, stamping: result.modificationTime)
        if reread { indexer?.enqueue(id, of: self) }
        return result
    }

    /// The cut is done: the data takes the asset's mtime (`modified`), the pin
    /// goes, and the mark with it if no handle can write.
    private func unpin(_ id: NodeID, stamping modified: Nanoseconds) throws(LibraryError) {
        let openFiles = self.openFiles
        let content = self.content
        try locked { db, held in
            Self.stampData(id, modified: modified, content, openFiles, held)
            if openFiles.unpin(id, held) { try db.transaction { try db.endWrite(id) } }
        }
    }

    /// The data takes the mtime a setattr or a truncate just gave the asset
    /// (`ContentStore.setModificationTime`), and OpenFiles hears of it in the
    /// same lock hold (a direct writer's refresh must not take the new stamp
    /// for a write). Data that cannot be stamped (kept in the database, or
    /// gone) shows only in a mount after a lost release: it then shows the
    /// data's older mtime.
    private static func stampData(_ id: NodeID, modified: Nanoseconds, _ content: ContentStore,
                                  _ openFiles: OpenFiles, _ held: borrowing DatabaseHeld) {
        guard (try? content.setModificationTime(id, to: modified)) != nil else { return }
        openFiles.dataStamped(id, modified: modified, held)
    }

    /// Puts back the attributes a setattr replaced, after its data change failed.
    private func restore(_ previous: Attributes) throws(LibraryError) {
        let openFiles = self.openFiles
        _ = try write(freesSpace: true, { db, _ in try db.writeAttributes(previous) },
                      committed: { _, held in openFiles.replace(with: previous, held) })
    }

    /// Clears the set-ID bits a write by `caller` clears (SetIDBits), before
    /// it opens `id` for writing: with FUSE passthrough no write reaches the
    /// daemon, so the open is the last moment it can. Returns whether the
    /// mode changed (the kernel's cached attributes are then stale).
    public func dropSetIDBits(_ id: NodeID, openedForWritingBy caller: Caller) throws(LibraryError) -> Bool {
        guard !caller.isSuperuser, !isReadOnly else { return false }
        let current = try attributes(of: id)
        let dropped = SetIDBits.droppedByWriting(current, by: caller)
        guard dropped != 0 else { return false }
        _ = try setAttributes(id, AttributeChanges(mode: current.mode & ~dropped))
        return true
    }
}

extension Library {
    /// Whether `id` is a view's year, month or duplicate set (a VirtualNode:
    /// computed, with no attributes of its own to keep or change). Throws
    /// `.notFound` for one that shows nothing now.
    func isVirtualDirectory(_ id: NodeID) throws(LibraryError) -> Bool {
        guard VirtualNode(id) != nil else { return false }
        _ = try attributes(of: id)
        return true
    }
}
