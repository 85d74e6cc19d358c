/// setattr: mode, owner, size and times, on any node.
extension Library {
    public func setAttributes(_ id: NodeID, _ changes: AttributeChanges) throws(LibraryError) -> Attributes {
        let openFiles = self.openFiles
        let content = self.content
        let result = try write { db -> Attributes in
            guard let stored = try db.attributes(of: id) else { throw LibraryError.notFound }
            // Start from the live state: unflushed writes must not be lost.
            var a = openFiles.overlay(stored)
            let now = currentTime()
            if let mode = changes.mode { a.mode = mode & 0o7777 }
            if let uid = changes.uid { a.uid = uid }
            if let gid = changes.gid { a.gid = gid }
            if let size = changes.size {
                guard a.kind == .asset else { throw LibraryError.isDirectory }
                guard size >= 0 else { throw LibraryError.invalidArgument }
                try content.truncate(id, to: size)
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
            return a
        }
        openFiles.replace(with: result)
        return result
    }
}
