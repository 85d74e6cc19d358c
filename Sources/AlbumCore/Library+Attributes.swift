/// setattr: mode, owner, size and times, on any node.
///
/// A size change touches the data, so it follows the write protocol: the
/// asset is marked as being written in the transaction that commits the new
/// size, the data is cut after the commit, and the mark goes afterwards (if
/// no open handle holds it). A crash in between leaves a mark, and the next
/// mount takes the size from the data: before or after, never a row that
/// promises bytes the data does not have.
extension Library {
    public func setAttributes(_ id: NodeID, _ changes: AttributeChanges) throws(LibraryError) -> Attributes {
        let openFiles = self.openFiles
        if changes.size != nil { try writeDataKeptInDatabase(id) }
        // Shrinking a file frees space: it may use the reserve.
        let (result, marksHere) = try write(freesSpace: changes.size != nil) { db -> (Attributes, Bool) in
            // Decided under the database lock, where a last release clears marks.
            let marksHere = changes.size != nil && !openFiles.isMarked(id)
            guard let stored = try db.attributes(of: id) else { throw LibraryError.notFound }
            if try db.isDeleted(id) { throw LibraryError.notPermitted }
            // Start from the live state: unflushed writes must not be lost.
            var a = openFiles.overlay(stored)
            let now = options.now()
            if let mode = changes.mode { a.mode = mode & 0o7777 }
            if let uid = changes.uid { a.uid = uid }
            if let gid = changes.gid { a.gid = gid }
            if let size = changes.size {
                guard a.kind.hasData else { throw LibraryError.isDirectory }
                guard size >= 0 else { throw LibraryError.invalidArgument }
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
            return (a, marksHere)
        }
        openFiles.replace(with: result)
        if let size = changes.size {
            try content.truncate(id, to: size)
            if marksHere {
                try write { db in
                    if !openFiles.isMarked(id) { try db.endWrite(id) }
                }
            }
        }
        return result
    }
}
