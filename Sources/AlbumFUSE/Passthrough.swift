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
/// How, on libfuse 3.14, which predates it: DeviceChannel asks for it in
/// the INIT reply if the kernel offers it. An open asset then has one
/// backing id (its content file registered with the kernel) for as long as
/// any handle of it is open, and each open or create reply names it. The kernel refuses to mix passthrough and cached
/// handles on one inode, so an asset whose first open could not be backed
/// stays served by the daemon until its last handle goes.
///
/// Whether it is on is decided once per mount, before the first reply that
/// reports a block size: the kernel must have taken the INIT request, and
/// registering a backing file (the store's content marker) must work. It
/// does not as a non-root daemon (EPERM), nor for a store inside another
/// FUSE or overlay mount (ELOOP: the stack would be too deep). The decision
/// and its reason are logged, one line per mount. A registration that fails
/// later turns it off for the rest of the mount, once, logged.
///
/// What the daemon gives up: it never sees those writes. `Library`'s live
/// state takes the content file's size and mtime instead
/// (`writesBypassDaemon`).
final class Passthrough: Sendable {
    private let channel: DeviceChannel
    /// A file of the store to try a backing registration with.
    private let probeFile: String
    /// 0 until decided (at the first request after INIT), then 1 on, 2 off.
    /// Read on every reply that reports a block size: an atomic, with the
    /// one decision made under `deciding`.
    private let state = Atomic<UInt8>(0)
    private let deciding = Mutex<Void>(())
    /// Held across the backing ioctls: a lock whose waiters sleep.
    private let assets = BlockingLock<[NodeID: Backing]>([:])

    private enum Backing {
        case kernel(id: Int32, handles: Int)
        case daemon(handles: Int)
    }

    init(channel: DeviceChannel, probeFile: String) {
        self.channel = channel
        self.probeFile = probeFile
    }

    /// Whether new handles are being backed. Asked first by the first
    /// request after INIT, which decides it.
    var isActive: Bool {
        switch state.load(ordering: .acquiring) {
        case 1: return true
        case 2: return false
        default:
            return deciding.withLock { _ in
                if state.load(ordering: .acquiring) == 0 {
                    let on = decide()
                    state.store(on ? 1 : 2, ordering: .releasing)
                }
                return state.load(ordering: .acquiring) == 1
            }
        }
    }

    /// The mount's one decision, logged with its reason.
    private func decide() -> Bool {
        let daemonPath = "file data goes through the daemon"
        if !channel.wantsPassthrough {
            Log.info("\(daemonPath) (-o nopassthrough)")
            return false
        }
        if !channel.hasPassthrough {
            Log.info("\(daemonPath) (this kernel offers no FUSE passthrough: Linux 6.9+ has it)")
            return false
        }
        if !probe() { return false }
        Log.info("file data: FUSE passthrough (the kernel reads and writes the content files itself)")
        return true
    }

    /// Registers and drops a backing file: whether the kernel takes ours.
    private func probe() -> Bool {
        let fd = open(probeFile, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            Log.error("FUSE passthrough is off for this mount: cannot open \(probeFile) (\(String(cString: strerror(errno))))")
            return false
        }
        defer { close(fd) }
        let id = albumfs_backing_open(channel.device, fd)
        guard id >= 0 else {
            refusedBacking(errno)
            return false
        }
        _ = albumfs_backing_close(channel.device, id)
        return true
    }

    /// The kernel turned a backing file down. EPERM: the daemon lacks
    /// CAP_SYS_ADMIN, the expected case of a user's mount.
    private func refusedBacking(_ code: Int32) {
        if code == EPERM {
            Log.info("file data goes through the daemon (FUSE passthrough needs CAP_SYS_ADMIN: the kernel refused a backing file, EPERM)")
        } else {
            Log.error("FUSE passthrough is off for this mount: the kernel refused a backing file (\(String(cString: strerror(code)))); file data goes through the daemon")
        }
    }

    /// Turns passthrough off for the rest of the mount after a refusal.
    private func turnOff(_ code: Int32) {
        if state.exchange(2, ordering: .acquiringAndReleasing) != 2 { refusedBacking(code) }
    }

    /// The backing id a new handle of `asset` is to be served from, or nil
    /// to serve it through the daemon. `descriptor` is the handle's content
    /// file; `daemonOnly`: the handle must be served by the daemon (data
    /// still arriving from the bucket), and so, until it is gone, must every
    /// other new handle of the asset, even once the data is local: the
    /// kernel answers EIO to a backed open of a file it caches for another
    /// handle. Each call is paired with one `release(_:)`.
    func acquire(_ asset: NodeID, descriptor: Int32, daemonOnly: Bool = false) -> Int32? {
        // Without passthrough there is no mode to keep consistent per asset.
        guard channel.hasPassthrough else { return nil }
        return assets.withLock { assets in
            switch assets[asset] {
            case .kernel(let id, let handles):
                // daemonOnly cannot come here: data arrives only for an evicted
                // asset, and an asset a handle has open is never evicted.
                assets[asset] = .kernel(id: id, handles: handles + 1)
                return id
            case .daemon(let handles):
                assets[asset] = .daemon(handles: handles + 1)
                return nil
            case nil:
                guard isActive, !daemonOnly else {
                    assets[asset] = .daemon(handles: 1)
                    return nil
                }
                let id = albumfs_backing_open(channel.device, descriptor)
                if id < 0 {
                    // The probe passed, so this is rare: off for the whole
                    // mount rather than a mix of slow and fast files.
                    turnOff(errno)
                    assets[asset] = .daemon(handles: 1)
                    return nil
                }
                assets[asset] = .kernel(id: id, handles: 1)
                return id
            }
        }
    }

    /// A handle of `asset` is gone; the last one gives its backing id back.
    /// (A handle acquired without passthrough has no entry: nothing to do.)
    func release(_ asset: NodeID) {
        assets.withLock { assets in
            switch assets[asset] {
            case .kernel(let id, let handles) where handles <= 1:
                _ = albumfs_backing_close(channel.device, id)
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
