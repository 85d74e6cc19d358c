import AlbumCore
import CFuse3
import Glibc

/// readdir(plus), mkdir, rmdir, unlink, rename, link, and the node kinds a
/// photo library does not hold (symlink, mknod: EPERM).
extension Operations {
    static func install(directories ops: inout fuse_lowlevel_ops) {
        ops.opendir = { req, ino, fi in
            // The kernel may keep listings: changes made through it refresh
            // them, and the Invalidator drops those that change elsewhere.
            // A computed view's listing is kept while nothing has changed
            // since it was read (ViewListings).
            let fs = FileSystem.of(req)
            let current = !Library.isComputed(ino)
                || fs.viewListings.isCurrent(ino, changeCount: fs.library.changeCount)
            fi!.pointee.cache_readdir = 1
            fi!.pointee.keep_cache = current ? 1 : 0
            fuse_reply_open(req, fi)
        }
        ops.readdir = { req, ino, size, offset, _ in
            FileSystem.of(req).readDirectory(req, ino, size: size, offset: offset, plus: false)
        }
        ops.readdirplus = { req, ino, size, offset, _ in
            FileSystem.of(req).readDirectory(req, ino, size: size, offset: offset, plus: true)
        }
        ops.fsyncdir = { req, _, _, _ in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                try fs.library.synchronizeDatabase()
                fuse_reply_err(req, 0)
            }
        }
        ops.mkdir = { req, parent, rawName, mode in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                fs.replyEntry(req, try fs.library.makeAlbum(in: parent, named: name(rawName), mode: mode, by: caller(req)))
            }
        }
        ops.rmdir = { req, parent, rawName in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                let changes = try fs.library.removeAlbum(parent, name(rawName), by: caller(req))
                fs.invalidator.beforeReply(changes)
                fuse_reply_err(req, 0)
            }
        }
        ops.unlink = { req, parent, rawName in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                let changes = try fs.library.unlink(parent, name(rawName), by: caller(req))
                // The kernel holds the directory and the file (which has no names in it).
                fs.invalidator.aroundReply(changes, holding: [parent]) { fuse_reply_err(req, 0) }
            }
        }
        ops.rename = { req, parent, rawName, newParent, newName, flags in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                let changes = try fs.library.rename(parent, name(rawName), to: newParent, name(newName),
                                                    flags: Library.RenameFlags(rawValue: flags), by: caller(req))
                let own = [ChangeSet.EntryName(directory: parent, name: name(rawName)),
                           ChangeSet.EntryName(directory: newParent, name: name(newName))]
                fs.invalidator.aroundReply(changes, holding: [parent, newParent], moving: own) { fuse_reply_err(req, 0) }
            }
        }
        ops.link = { req, ino, newParent, newName in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                let (attributes, changes) = try fs.library.link(ino, into: newParent, named: name(newName))
                // The kernel holds the directory linked into.
                fs.invalidator.aroundReply(changes, holding: [newParent]) { fs.replyEntry(req, attributes) }
            }
        }
        // No symlinks or device nodes in a photo library (SEMANTICS.md).
        ops.symlink = { req, _, _, _ in FileSystem.of(req).replyError(req, .notPermitted) }
        ops.mknod = { req, _, _, _, _ in FileSystem.of(req).replyError(req, .notPermitted) }
    }
}

extension FileSystem {
    /// Fills one readdir(plus) reply. Offsets are cookies: 1 and 2 follow `.`
    /// and `..`; an entry's cookie is its row id + 2, stable while the
    /// directory changes around it.
    func readDirectory(_ req: fuse_req_t?, _ directory: NodeID, size: Int, offset: Int, plus: Bool) {
        if offset == 0 {
            invalidator.listing(directory)
            if Library.isComputed(directory) { viewListings.reading(directory, changeCount: library.changeCount) }
        }
        replying(req) { () throws(LibraryError) in
            var buffer = [CChar](repeating: 0, count: size)
            var used = 0
            var next = offset

            func add(_ entryName: Name, _ attributes: Attributes, cookie: Int) -> Bool {
                var cName = entryName.map { CChar(bitPattern: $0) }
                cName.append(0)
                let needed = buffer.withUnsafeMutableBufferPointer { buf in
                    let start = buf.baseAddress! + used
                    if plus {
                        var e = self.entry(for: attributes)
                        return fuse_add_direntry_plus(req, start, size - used, cName, &e, off_t(cookie))
                    }
                    var s = self.stat(of: attributes)
                    return fuse_add_direntry(req, start, size - used, cName, &s, off_t(cookie))
                }
                guard needed <= size - used else { return false }
                used += needed
                return true
            }

            // `.` and `..` only on the first calls: later ones need no extra query.
            if next < 2 {
                let directoryAttributes = try library.attributes(of: directory)
                if next == 0 {
                    guard add([0x2e], directoryAttributes, cookie: 1) else { return reply(req, buffer, used) }
                    next = 1
                }
                let parent = try library.parent(ofDirectory: directory)
                var parentAttributes = directoryAttributes
                parentAttributes.id = parent
                guard add([0x2e, 0x2e], parentAttributes, cookie: 2) else { return reply(req, buffer, used) }
                next = 2
            }
            // Asks for about as many entries as can fit; the next call resumes by cookie.
            let estimate = max(8, size / (plus ? 160 : 32))
            let entries = try library.list(directory, after: Int64(next - 2), limit: estimate)
            var added = 0
            for entry in entries {
                guard add(entry.name, entry.attributes, cookie: Int(entry.cookie) + 2) else { break }
                added += 1
            }
            // A file manager looks for each file's thumbnail as the listing reaches it.
            thumbnails?.publish(directory, entries.prefix(added))
            reply(req, buffer, used)
        }
    }

    private func reply(_ req: fuse_req_t?, _ buffer: [CChar], _ used: Int) {
        _ = buffer.withUnsafeBufferPointer { fuse_reply_buf(req, $0.baseAddress, used) }
    }
}
