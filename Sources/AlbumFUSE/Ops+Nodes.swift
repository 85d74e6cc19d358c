import AlbumCore
import CFuse3
import Glibc

/// lookup, forget, getattr, setattr, statfs.
extension Operations {
    static func install(nodes ops: inout fuse_lowlevel_ops) {
        ops.lookup = { req, parent, rawName in
            let fs = FileSystem.of(req)
            do throws(LibraryError) {
                fs.replyEntry(req, try fs.library.lookup(parent, name(rawName), by: caller(req)))
            } catch .notFound {
                var negative = fs.negativeEntry()
                fuse_reply_entry(req, &negative)
            } catch {
                fs.replyError(req, error)
            }
        }
        // Node ids are database ids and nothing is held per lookup: nothing to forget.
        ops.forget = { req, _, _ in fuse_reply_none(req) }
        ops.forget_multi = { req, _, _ in fuse_reply_none(req) }

        ops.getattr = { req, ino, _ in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                fs.replyAttributes(req, try fs.library.attributes(of: ino))
            }
        }
        ops.setattr = { req, ino, attr, toSet, _ in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                let changes = Operations.attributeChanges(attr!.pointee, toSet)
                // FATTR_KILL_SUIDGID: the caller lacks CAP_FSETID (FUSE_HANDLE_KILLPRIV_V2).
                let dropsSetID = toSet & FATTR_KILL_SUIDGID != 0
                fs.replyAttributes(req, try fs.library.setAttributes(ino, changes, by: caller(req), dropsSetID: dropsSetID))
            }
        }
        ops.statfs = { req, _ in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                let stats = try fs.library.statistics()
                var reply = statvfs()
                reply.f_bsize = stats.blockSize
                reply.f_frsize = stats.blockSize
                reply.f_blocks = UInt(stats.blocks)
                reply.f_bfree = UInt(stats.freeBlocks)
                reply.f_bavail = UInt(stats.availableBlocks)
                reply.f_files = UInt(stats.files)
                reply.f_ffree = UInt(stats.freeFiles)
                reply.f_favail = UInt(stats.freeFiles)
                reply.f_namemax = UInt(Names.maxLength)
                fuse_reply_statfs(req, &reply)
            }
        }
    }

    /// Decodes setattr's `to_set` bits into the library's request.
    static func attributeChanges(_ attr: stat, _ toSet: Int32) -> AttributeChanges {
        var changes = AttributeChanges()
        if toSet & FUSE_SET_ATTR_MODE != 0 { changes.mode = attr.st_mode & 0o7777 }
        if toSet & FUSE_SET_ATTR_UID != 0 { changes.uid = attr.st_uid }
        if toSet & FUSE_SET_ATTR_GID != 0 { changes.gid = attr.st_gid }
        if toSet & FUSE_SET_ATTR_SIZE != 0 { changes.size = Int64(attr.st_size) }
        if toSet & FUSE_SET_ATTR_ATIME_NOW != 0 {
            changes.accessTime = .now
        } else if toSet & FUSE_SET_ATTR_ATIME != 0 {
            changes.accessTime = .set(attr.st_atim.nanoseconds)
        }
        if toSet & FUSE_SET_ATTR_MTIME_NOW != 0 {
            changes.modificationTime = .now
        } else if toSet & FUSE_SET_ATTR_MTIME != 0 {
            changes.modificationTime = .set(attr.st_mtim.nanoseconds)
        }
        // Nothing to set: a chown(f, -1, -1), whose taking of set-ID bits the
        // kernel leaves to us under FUSE_HANDLE_KILLPRIV_V2 (it is the one
        // call that reaches a filesystem with no attribute to change).
        let anything = FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE
            | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW
        if toSet & anything == 0 { changes.chown = true }
        return changes
    }
}
