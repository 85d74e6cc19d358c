import AlbumCore
import CFuse3
import Glibc

/// create, open, read, write, fallocate, flush, release, fsync. An open file's handle
/// (`fi->fh`) is a retained OpenFile; release gives it back.
extension Operations {
    static func install(files ops: inout fuse_lowlevel_ops) {
        ops.create = { req, parent, rawName, mode, fi in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                let (attributes, changes) = try fs.library.createAsset(
                    in: parent, named: name(rawName), mode: mode, by: caller(req))
                let file = try fs.library.openCreated(attributes)
                fi!.pointee.fh = Operations.handle(for: file)
                var e = fs.entry(for: attributes)
                fs.invalidator.beforeReply(changes)
                let sent: Int32
                if let backing = fs.backing(file, fi) {
                    sent = albumfs_reply_create_backed(req, &e, fi, backing)
                } else {
                    fs.writesThroughDaemon(file, fi)
                    sent = fuse_reply_create(req, &e, fi)
                }
                if sent != 0 { fs.forgetUnsent(fi) }
            }
        }
        ops.open = { req, ino, fi in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                let flags = fi!.pointee.flags
                let writable = flags & O_ACCMODE != O_RDONLY
                // Set-ID bits go before a non-root caller can write: under
                // passthrough its writes never come here.
                if writable, try fs.library.dropSetIDBits(ino, openedForWritingBy: caller(req)) {
                    fs.invalidator.attributesChanged(ino)
                }
                let file = try fs.library.open(ino, writable: writable, truncate: flags & O_TRUNC != 0)
                fi!.pointee.fh = Operations.handle(for: file)
                // Every change to the data passes through this kernel, so its
                // page cache stays valid across opens.
                fi!.pointee.keep_cache = 1
                // A handle that cannot write has nothing to commit at close:
                // spare every reader's close() a round trip.
                if !writable { fi!.pointee.noflush = 1 }
                let sent: Int32
                if let backing = fs.backing(file, fi) {
                    sent = albumfs_reply_open_backed(req, fi, backing)
                } else {
                    fs.writesThroughDaemon(file, fi)
                    sent = fuse_reply_open(req, fi)
                }
                if sent != 0 { fs.forgetUnsent(fi) }
            }
        }
        ops.read = { req, _, size, offset, fi in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                // Served through io_uring: straight into the entry's reply
                // buffer, which the reply then needs no copy into.
                let ringBuffer = RequestRing.replyBuffer(holding: size)
                let buffer = ringBuffer ?? UnsafeMutableRawPointer.allocate(byteCount: max(size, 1), alignment: 4096)
                defer { if ringBuffer == nil { buffer.deallocate() } }
                let count = try fs.library.read(Operations.file(fi), into: buffer, count: size, at: Int64(offset))
                fuse_reply_buf(req, buffer.assumingMemoryBound(to: CChar.self), count)
            }
        }
        ops.write_buf = { req, _, source, offset, fi in
            // The data comes as libfuse received it (in memory, or in a pipe
            // if splice reads are ever negotiated); fuse_buf_copy moves it into
            // the content file either way.
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                let count = fuse_buf_size(source)
                let written = try fs.library.write(Operations.file(fi), count: count, at: Int64(offset)) { descriptor throws(LibraryError) in
                    var destination = fuse_bufvec()
                    destination.count = 1
                    destination.buf.size = count
                    destination.buf.flags = fuse_buf_flags(rawValue: FUSE_BUF_IS_FD.rawValue | FUSE_BUF_FD_SEEK.rawValue)
                    destination.buf.fd = descriptor
                    destination.buf.pos = offset
                    // libfuse answers the bytes copied, or a negated errno.
                    let copied = fuse_buf_copy(&destination, source, fuse_buf_copy_flags(rawValue: 0))
                    if copied < 0 { throw LibraryError(errno: Int32(-copied)) }
                    return copied
                }
                fuse_reply_write(req, written)
            }
        }
        // Not served from the backing file under passthrough: the kernel sends
        // FALLOCATE here for every handle.
        ops.fallocate = { req, _, mode, offset, length, fi in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                try fs.library.allocate(Operations.file(fi), mode: mode, offset: Int64(offset), length: Int64(length))
                fuse_reply_err(req, 0)
            }
        }
        ops.flush = { req, _, fi in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                try fs.library.flush(Operations.file(fi))
                fuse_reply_err(req, 0)
            }
        }
        ops.fsync = { req, _, dataOnly, fi in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                try fs.library.synchronize(Operations.file(fi), dataOnly: dataOnly != 0)
                fuse_reply_err(req, 0)
            }
        }
        ops.release = { req, _, fi in
            let fs = FileSystem.of(req)
            let file = Operations.takeFile(fi!.pointee.fh)
            defer { fs.passthrough.release(file.id) }
            fs.replying(req) { () throws(LibraryError) in
                try fs.library.release(file)
                fuse_reply_err(req, 0)
            }
            if fs.invalidator.hasCachedListings, let directories = try? fs.library.directories(showing: file.id) {
                fs.invalidator.closed(shownIn: directories)
            }
        }
    }

    static func handle(for file: OpenFile) -> UInt64 {
        UInt64(UInt(bitPattern: Unmanaged.passRetained(file).toOpaque()))
    }

    static func file(_ fi: UnsafeMutablePointer<fuse_file_info>?) -> OpenFile {
        Unmanaged<OpenFile>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(fi!.pointee.fh))!).takeUnretainedValue()
    }

    /// Takes back the reference `handle(for:)` gave the kernel.
    static func takeFile(_ fh: UInt64) -> OpenFile {
        Unmanaged<OpenFile>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(fh))!).takeRetainedValue()
    }
}

extension FileSystem {
    /// The backing id to serve a new handle from (FUSE passthrough), having
    /// told the library that its writes bypass us; nil: served by the daemon.
    /// A backed handle needs no FLUSH: its commit waits for the release
    /// anyway (see OpenFiles.flushing), so close() is spared a round trip.
    /// Data still arriving from the bucket is served by the daemon: its
    /// reads wait for the bytes they ask for, where the kernel would read holes.
    /// Every handle is counted with `passthrough` (the release gives each back).
    func backing(_ file: OpenFile, _ fi: UnsafeMutablePointer<fuse_file_info>?) -> Int32? {
        guard let id = passthrough.acquire(file.id, descriptor: file.descriptor, daemonOnly: file.isArriving) else { return nil }
        library.writesBypassDaemon(file)
        fi!.pointee.noflush = 1
        return id
    }

    /// A handle served by the daemon (no passthrough). One that can write is
    /// direct I/O, where the kernel lets it still be mmapped shared
    /// (FUSE_DIRECT_IO_ALLOW_MMAP): each write() goes to us as it is, with
    /// no copy into the FUSE page cache first and no security.capability
    /// round trip before the first one (the set-ID rules are ours anyway:
    /// see SetIDBits); the kernel drops the cached pages a direct write
    /// covers, so readers of other handles stay right. And it needs no
    /// FLUSH, as a backed handle: its size and times are live in OpenFiles
    /// from the write on, the release commits them, and a crash before that
    /// leaves the unfinished-write mark, from which the next mount takes
    /// size and mtime from the data. Measured as a normal user (bench,
    /// 300 × 1 MiB and 512 MiB, ratio to a plain directory, medians of
    /// runs): a copied photo costs 5 requests instead of 7; `cp -r` + sync
    /// 4.34 → 2.82, `cp` of 512 MiB + sync 2.27 → 1.31. Readers stay cached
    /// (`keep_cache`): direct reads were measured slower (docs/PERFORMANCE.md, "Tried and dropped").
    func writesThroughDaemon(_ file: OpenFile, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        guard file.isWritable else { return }
        if channel.hasDirectIOMmap { fi!.pointee.direct_io = 1 }
        fi!.pointee.noflush = 1
    }

    /// An open or create reply the kernel never saw (the request was
    /// interrupted): give back everything the handle held.
    func forgetUnsent(_ fi: UnsafeMutablePointer<fuse_file_info>?) {
        let file = Operations.takeFile(fi!.pointee.fh)
        passthrough.release(file.id)
        try? library.release(file)
    }
}
