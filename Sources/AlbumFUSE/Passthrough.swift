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
/// What the daemon gives up: it never sees those writes. `Library`'s live
/// state takes the content file's size and mtime instead
/// (`writesBypassDaemon`).
final class Passthrough: Sendable {
    private let channel: DeviceChannel
    /// Set when the kernel turned a backing file down with EPERM: it did not
    /// take the INIT request after all, or the daemon lacks CAP_SYS_ADMIN.
    private let refused = Atomic<Bool>(false)
    private let assets = Mutex<[NodeID: Backing]>([:])

    private enum Backing {
        case kernel(id: Int32, handles: Int)
        case daemon(handles: Int)
    }

    init(channel: DeviceChannel) {
        self.channel = channel
    }

    /// Whether new handles are being backed.
    var isActive: Bool { channel.hasPassthrough && !refused.load(ordering: .relaxed) }

    /// The backing id a new handle of `asset` is to be served from, or nil
    /// to serve it through the daemon. `descriptor` is the handle's content
    /// file. Each call is paired with one `release(_:)`.
    func acquire(_ asset: NodeID, descriptor: Int32) -> Int32? {
        // Without passthrough there is no mode to keep consistent per asset.
        guard channel.hasPassthrough else { return nil }
        return assets.withLock { assets in
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
                let id = albumfs_backing_open(channel.device, descriptor)
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
