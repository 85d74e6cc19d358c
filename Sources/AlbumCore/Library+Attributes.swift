/// setattr: mode, owner, size and times, on any node.
///
/// A size change touches the data, so it follows the write protocol: the
/// asset is marked as being written in the transaction that commits the new
/// size, the data is cut after the commit, and the mark goes afterwards (if
/// no open handle holds it). A crash in between leaves a mark, and the next
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
        let openFiles = self.openFiles
        // Shrinking a file frees space: it may use the reserve.
        let largestFileSize = self.largestFileSize
        let (previous, result, marksHere) = try write(freesSpace: changes.size != nil) { db -> (Attributes, Attributes, Bool) in
            // Decided under the database lock, where a last release clears marks.
            let marksHere = changes.size != nil && !openFiles.isMarked(id)
            guard let stored = try db.attributes(of: id) else { throw LibraryError.notFound }
            // Start from the live state: unflushed writes must not be lost.
            let previous = openFiles.overlay(stored)
            var a = previous
            let now = currentTime()
            if let mode = changes.mode {
                a.mode = mode & 0o7777
            } else {
                if changes.uid != nil || changes.gid != nil { a.mode &= ~SetIDBits.droppedByChown(previous, by: caller) }
                if changes.size != nil && dropsSetID { a.mode &= ~SetIDBits.droppedByWriting(previous, by: caller) }
            }
            if let uid = changes.uid { a.uid = uid }
            if let gid = changes.gid { a.gid = gid }
            if let size = changes.size {
                guard a.kind == .asset else { throw LibraryError.isDirectory }
                guard size >= 0 else { throw LibraryError.invalidArgument }
                guard size <= largestFileSize else { throw LibraryError.fileTooLarge }
                if marksHere { try db.beginWrite(id) }
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
            return (previous, a, marksHere)
        }
        openFiles.replace(with: result)
        if let size = changes.size {
            do {
                try content.truncate(id, to: size)
            } catch {
                try restore(previous, unmarking: marksHere)
                throw error
            }
            if marksHere {
                try write { db in
                    if !openFiles.isMarked(id) { try db.endWrite(id) }
                }
            }
        }
        return result
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

    /// Puts back the attributes a setattr replaced, after its data change failed.
    private func restore(_ previous: Attributes, unmarking: Bool) throws(LibraryError) {
        let openFiles = self.openFiles
        try write(freesSpace: true) { db in
            try db.writeAttributes(previous)
            if unmarking && !openFiles.isMarked(previous.id) { try db.endWrite(previous.id) }
        }
        openFiles.replace(with: previous)
    }
}
