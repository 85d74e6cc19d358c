import CFuse3
import Glibc
import Synchronization

/// The session's /dev/fuse I/O, through libfuse's custom-io hooks: plain
/// read and writev, except that the INIT reply asks for two kernel features
/// libfuse 3.14 predates, when the kernel offers them:
///
/// - FUSE_HANDLE_KILLPRIV_V2: the kernel may then mark an inode as having
///   no suid bits and no security.capability after one check (S_NOSEC).
///   Without it, every write costs a GETXATTR round trip first (measured:
///   8 per 1 MiB photo that cp writes in 128 KiB pieces). albumfs then
///   clears set-ID bits itself, where the kernel says (FATTR_KILL_SUIDGID)
///   or where it must (chown, an open for writing: see SetIDBits);
/// - FUSE_PASSTHROUGH, unless `-o nopassthrough` (see Passthrough.swift);
/// - FUSE_DIRECT_IO_ALLOW_MMAP: on the daemon path, handles that write are
///   direct I/O (see FileSystem.writesThroughDaemon), and this keeps shared
///   mmap working on them.
///
/// - FUSE_OVER_IO_URING, with `-o uring`, where the kernel offers it
///   (Linux 6.14+ with the fuse module's `enable_uring` on): requests then
///   come through per-CPU io_uring queues (FuseRing), with no read() and
///   writev() on /dev/fuse and no thread switch between the two. The ring
///   is made before the reply asks for it, so a ring that cannot be made
///   leaves the session on /dev/fuse; FORGET, INTERRUPT and notifications
///   stay on /dev/fuse either way.
///
/// INIT is the first request of a session and is answered before any other
/// is read, so watching for it costs one comparison per request.
final class DeviceChannel: Sendable {
    let wantsPassthrough: Bool
    let wantsRing: Bool
    /// FUSE over io_uring, once INIT took it (`-o uring`).
    let ring = RequestRing()
    /// The unique id of the INIT request while its reply is pending, and
    /// what the kernel offered in it.
    private let pendingInit = Atomic<UInt64>(0)
    private let offered = Atomic<UInt64>(0)
    private let negotiatedPassthrough = Atomic<Bool>(false)
    private let negotiatedDirectIOMmap = Atomic<Bool>(false)
    private let descriptor = Atomic<Int32>(-1)
    private let session = Atomic<UInt>(0)

    init(wantsPassthrough: Bool, wantsRing: Bool = false) {
        self.wantsPassthrough = wantsPassthrough
        self.wantsRing = wantsRing
    }

    /// /dev/fuse, for the passthrough ioctls.
    var device: Int32 { descriptor.load(ordering: .acquiring) }

    /// Whether the INIT reply asked for passthrough (the kernel may still
    /// refuse a backing file: see `Passthrough.acquire`).
    var hasPassthrough: Bool { negotiatedPassthrough.load(ordering: .acquiring) }

    /// Whether the kernel lets a direct I/O handle be mmapped shared.
    var hasDirectIOMmap: Bool { negotiatedDirectIOMmap.load(ordering: .acquiring) }

    /// Takes over the session's device I/O. Call after fuse_session_mount,
    /// before the loop starts.
    func install(on session: OpaquePointer) -> Bool {
        descriptor.store(fuse_session_fd(session), ordering: .releasing)
        self.session.store(UInt(bitPattern: session), ordering: .releasing)
        var io = fuse_custom_io()
        io.read = { fd, buffer, length, userdata in
            let count = Glibc.read(fd, buffer, length)
            if count > 0, let buffer {
                FileSystem.from(userdata).channel.received(UnsafeRawPointer(buffer), count)
            }
            return count
        }
        io.writev = { fd, iov, count, userdata in
            FileSystem.from(userdata).channel.send(fd, iov, count)
        }
        return fuse_session_custom_io(session, &io, fuse_session_fd(session)) == 0
    }

    private func received(_ request: UnsafeRawPointer, _ length: Int) {
        guard pendingInit.load(ordering: .relaxed) == 0 else { return }
        var flags: UInt64 = 0
        let unique = albumfs_init_request(request, length, &flags)
        guard unique != 0 else { return }
        offered.store(flags, ordering: .relaxed)
        pendingInit.store(unique, ordering: .releasing)
    }

    private func send(_ fd: Int32, _ iov: UnsafeMutablePointer<iovec>?, _ count: Int32) -> Int {
        if let sent = ring.reply(iov, count) { return sent }
        let pending = pendingInit.load(ordering: .acquiring)
        guard pending != 0, let iov, count == 2, albumfs_reply_unique(iov, count) == pending else {
            return Glibc.writev(fd, iov, count)
        }
        pendingInit.store(0, ordering: .relaxed)
        // A patched copy of libfuse's fuse_init_out.
        let length = iov[1].iov_len
        let reply = UnsafeMutableRawPointer.allocate(byteCount: length, alignment: 8)
        defer { reply.deallocate() }
        reply.copyMemory(from: iov[1].iov_base, byteCount: length)
        let asked = albumfs_init_reply_patch(reply, length, offered.load(ordering: .relaxed), wantsPassthrough ? 1 : 0)
        negotiatedPassthrough.store(asked & ALBUMFS_ASKED_PASSTHROUGH != 0, ordering: .releasing)
        negotiatedDirectIOMmap.store(asked & ALBUMFS_ASKED_DIRECT_IO_ALLOW_MMAP != 0, ordering: .releasing)
        let newRing = wantsRing ? makeRing(reply, length) : nil
        if newRing != nil { albumfs_init_reply_ask_ring(reply) }
        var patched = [iov[0], iovec(iov_base: reply, iov_len: length)]
        let sent = Glibc.writev(fd, &patched, 2)
        if let newRing {
            if sent < 0 { RequestRing.discard(newRing) } else { ring.start(newRing) }
        }
        return sent
    }

    /// The ring, ready to register, if the kernel offers one and it can be made.
    private func makeRing(_ reply: UnsafeMutableRawPointer, _ length: Int) -> OpaquePointer? {
        let payload = albumfs_init_reply_ring_payload(reply, length, offered.load(ordering: .relaxed))
        guard payload > 0 else {
            Log.info("requests: /dev/fuse (-o uring: this kernel offers no FUSE over io_uring; Linux 6.14+ does, with the fuse module's enable_uring on)")
            return nil
        }
        return RequestRing.make(session: UnsafeMutableRawPointer(bitPattern: session.load(ordering: .acquiring)),
                                device: device, payload: payload)
    }
}
