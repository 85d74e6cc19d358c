import AlbumCore
import CFuse3
import Glibc
import Synchronization

/// FUSE passthrough: open assets whose reads, writes and mmaps the kernel
/// serves from their content file itself, with no READ or WRITE request
/// reaching this daemon (Linux 6.9+, as root).
///
/// Why: without it every read and write is a round trip plus two extra
/// copies of the data (measured: a 1 MiB write costs 961 µs against 269 µs
/// on the plain disk below, a 4 KiB random read 25 µs more than plain).
///
/// How, on libfuse 3.14, which predates it: the session's device I/O goes
/// through `install(on:)`'s read and writev, which watch the INIT exchange;
/// if the kernel offers FUSE_PASSTHROUGH, the INIT reply asks for it. An
/// open asset then has one backing id (its content file registered with
/// the kernel) for as long as any handle of it is open, and each open or
/// create reply names it. The kernel refuses to mix passthrough and cached
/// handles on one inode, so an asset whose first open could not be backed
/// stays served by the daemon until its last handle goes.
///
/// What the daemon gives up: it never sees those writes. `Library`'s live
/// state takes the content file's size and mtime instead
/// (`writesBypassDaemon`).
final class Passthrough: Sendable {
    /// False with `-o nopassthrough`: never ask the kernel.
    let wanted: Bool
    /// The unique id of the INIT request while its reply is pending.
    private let pendingInit = Atomic<UInt64>(0)
    private let asked = Atomic<Bool>(false)
    private let refused = Atomic<Bool>(false)
    private let device = Atomic<Int32>(-1)
    private let assets = Mutex<[NodeID: Backing]>([:])

    private enum Backing {
        case kernel(id: Int32, handles: Int)
        case daemon(handles: Int)
    }

    init(wanted: Bool) {
        self.wanted = wanted
    }

    /// Whether handles are being backed (asked for at INIT, never refused).
    var isActive: Bool { asked.load(ordering: .acquiring) && !refused.load(ordering: .relaxed) }

    /// Routes the session's device I/O through this object. Call after
    /// fuse_session_mount, before the loop: INIT is the first request.
    func install(on session: OpaquePointer) -> Bool {
        guard wanted else { return true }
        device.store(fuse_session_fd(session), ordering: .releasing)
        var io = fuse_custom_io()
        io.read = { fd, buffer, length, userdata in
            let count = Glibc.read(fd, buffer, length)
            if count > 0, let buffer {
                FileSystem.from(userdata).passthrough.received(UnsafeRawPointer(buffer), count)
            }
            return count
        }
        io.writev = { fd, iov, count, userdata in
            FileSystem.from(userdata).passthrough.send(fd, iov, count)
        }
        return fuse_session_custom_io(session, &io, fuse_session_fd(session)) == 0
    }

    private func received(_ request: UnsafeRawPointer, _ length: Int) {
        var isInit: Int32 = 0
        let unique = albumfs_request_unique(request, length, &isInit)
        guard isInit != 0,
              albumfs_init_request_flags2(request, length) & UInt32(ALBUMFS_FUSE_PASSTHROUGH_FLAGS2) != 0 else { return }
        pendingInit.store(unique, ordering: .releasing)
    }

    private func send(_ fd: Int32, _ iov: UnsafeMutablePointer<iovec>?, _ count: Int32) -> Int {
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
        guard albumfs_init_reply_ask_passthrough(reply, length) != 0 else { return Glibc.writev(fd, iov, count) }
        asked.store(true, ordering: .releasing)
        var patched = [iov[0], iovec(iov_base: reply, iov_len: length)]
        return Glibc.writev(fd, &patched, 2)
    }

    /// The backing id a new handle of `asset` is to be served from, or nil
    /// to serve it through the daemon. `descriptor` is the handle's content
    /// file. Each call is paired with one `release(_:)`.
    func acquire(_ asset: NodeID, descriptor: Int32) -> Int32? {
        assets.withLock { assets in
            switch assets[asset] {
            case .kernel(let id, let handles):
                assets[asset] = .kernel(id: id, handles: handles + 1)
                return id
            case .daemon(let handles):
                assets[asset] = .daemon(handles: handles + 1)
                return nil
            case nil:
                guard isActive else {
                    assets[asset] = .daemon(handles: 1)
                    return nil
                }
                let id = albumfs_backing_open(device.load(ordering: .acquiring), descriptor)
                if id < 0 {
                    // EPERM: the kernel did not take the INIT request (or we
                    // are not root). Anything else (out of memory, a backing
                    // file it cannot stack on) is this asset's alone.
                    if errno == EPERM { refused.store(true, ordering: .relaxed) }
                    assets[asset] = .daemon(handles: 1)
                    return nil
                }
                assets[asset] = .kernel(id: id, handles: 1)
                return id
            }
        }
    }

    /// A handle of `asset` is gone; the last one gives its backing id back.
    func release(_ asset: NodeID) {
        assets.withLock { assets in
            switch assets[asset] {
            case .kernel(let id, let handles) where handles <= 1:
                _ = albumfs_backing_close(device.load(ordering: .acquiring), id)
                assets[asset] = nil
            case .kernel(let id, let handles):
                assets[asset] = .kernel(id: id, handles: handles - 1)
            case .daemon(let handles) where handles <= 1:
                assets[asset] = nil
            case .daemon(let handles):
                assets[asset] = .daemon(handles: handles - 1)
            case nil:
                break
            }
        }
    }
}
