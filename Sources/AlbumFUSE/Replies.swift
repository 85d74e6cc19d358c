import AlbumCore
import CFuse3
import Glibc

/// Turning library values into FUSE replies. Every request gets exactly one.
extension FileSystem {
    func stat(of a: Attributes) -> stat {
        var s = Glibc.stat()
        s.st_ino = UInt(a.id)
        s.st_mode = (a.kind.isDirectory ? S_IFDIR : S_IFREG) | a.mode
        s.st_nlink = UInt(a.linkCount)
        s.st_uid = a.uid
        s.st_gid = a.gid
        s.st_size = Int(a.size)
        s.st_blksize = preferredBlockSize(of: a)
        // `du` counts what is on the local disk; `du --apparent-size` the library.
        s.st_blocks = a.isRemoteOnly ? 0 : Int((a.size + 511) / 512)
        s.st_atim = timespec(nanoseconds: a.accessTime)
        s.st_mtim = timespec(nanoseconds: a.modificationTime)
        s.st_ctim = timespec(nanoseconds: a.changeTime)
        return s
    }

    /// Names in the computed views are cached like any other: whatever makes
    /// one wrong (a delete, a rename in the roll, facts read anew) invalidates
    /// it (ComputedViews.names), with the month, year or set it may empty.
    func entry(for a: Attributes) -> fuse_entry_param {
        var e = fuse_entry_param()
        e.ino = a.id
        e.generation = 1
        e.attr = stat(of: a)
        e.attr_timeout = timeouts.attributes
        e.entry_timeout = timeouts.entry
        return e
    }

    /// A negative entry, not cached: names appear in the roll through other
    /// directories (a create in an album adds a roll entry, a rename in an
    /// album can rename the roll entry), and a cached "no such name" would
    /// hide them. (Albums gain names only through requests on themselves,
    /// but caching their misses was measured to save nothing where it would
    /// matter: `cp` creates with O_EXCL, which makes the kernel look the name
    /// up again anyway.)
    func negativeEntry() -> fuse_entry_param {
        fuse_entry_param()
    }

    func replyEntry(_ req: fuse_req_t?, _ a: Attributes) {
        var e = entry(for: a)
        fuse_reply_entry(req, &e)
    }

    func replyAttributes(_ req: fuse_req_t?, _ a: Attributes) {
        var s = stat(of: a)
        fuse_reply_attr(req, &s, timeouts.attributes)
    }

    func replyError(_ req: fuse_req_t?, _ error: LibraryError) {
        if let line = error.diagnostic { Log.error(line) }
        fuse_reply_err(req, error.errno)
    }

    /// Runs `body`; a thrown error becomes the reply.
    func replying(_ req: fuse_req_t?, _ body: () throws(LibraryError) -> Void) {
        do {
            try body()
        } catch {
            replyError(req, error)
        }
    }
}

extension timespec {
    init(nanoseconds: Int64) {
        // Floor division keeps times before 1970 correct.
        var seconds = nanoseconds / 1_000_000_000
        var rest = nanoseconds % 1_000_000_000
        if rest < 0 { seconds -= 1; rest += 1_000_000_000 }
        self.init(tv_sec: Int(seconds), tv_nsec: Int(rest))
    }

    var nanoseconds: Int64 { Int64(tv_sec) * 1_000_000_000 + Int64(tv_nsec) }
}

/// A name from the kernel, as raw bytes.
func name(_ pointer: UnsafePointer<CChar>?) -> Name {
    guard let pointer else { return [] }
    return Array(UnsafeRawBufferPointer(start: pointer, count: strlen(pointer)))
}

/// The uid and gid of the process behind a request.
func caller(_ req: fuse_req_t?) -> Caller {
    let context = fuse_req_ctx(req)!.pointee
    return Caller(uid: context.uid, gid: context.gid)
}
