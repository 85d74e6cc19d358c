import FuseRing
import Glibc
import Synchronization

/// FUSE over io_uring for the session (`-o uring`; FuseRing does the work,
/// DESIGN.md § Requests: /dev/fuse or io_uring): made while the INIT reply
/// that asks for it is on its way, started once the kernel took that reply,
/// stopped after the session's loop. Until then, and without it, every
/// reply goes to /dev/fuse.
final class RequestRing: Sendable {
    /// Ring entries (each a thread) per CPU queue: as many requests of one
    /// CPU's callers as may wait in the daemon at once.
    static let entriesPerQueue: UInt32 = 4
    /// The albumfs_ring serving requests (0: none).
    private let pointer = Atomic<UInt>(0)

    private var active: OpaquePointer? { OpaquePointer(bitPattern: pointer.load(ordering: .acquiring)) }

    /// A ring ready to register (threads, io_urings, buffers of `payload`
    /// bytes), or nil, logged, when it cannot be made: then INIT must not ask.
    static func make(session: UnsafeMutableRawPointer?, device: Int32, payload: Int) -> OpaquePointer? {
        guard let made = albumfs_ring_create(session, device, entriesPerQueue, payload) else {
            Log.error("requests stay on /dev/fuse: cannot set up FUSE over io_uring (\(String(cString: strerror(errno))))")
            return nil
        }
        Log.info("requests: FUSE over io_uring (\(albumfs_ring_queue_count()) queues × \(entriesPerQueue) entries)")
        return made
    }

    /// After the kernel took the INIT reply that asked for `made`: its entries register and serve.
    func start(_ made: OpaquePointer) {
        pointer.store(UInt(bitPattern: made), ordering: .releasing)
        albumfs_ring_start(made)
    }

    /// A ring made for an INIT reply the kernel never took: its threads end unstarted.
    static func discard(_ made: OpaquePointer) {
        albumfs_ring_stop(made)
        albumfs_ring_free(made)
    }

    /// Hands a reply to the ring if it answers a request the ring serves;
    /// nil: it goes to /dev/fuse.
    func reply(_ iov: UnsafeMutablePointer<iovec>?, _ count: Int32) -> Int? {
        guard let ring = active else { return nil }
        let sent = albumfs_ring_reply(ring, iov, count)
        return sent >= 0 ? sent : nil
    }

    /// Where the reply to the request this thread serves through the ring
    /// can be built with no copy, if it holds `size` bytes; nil: not served
    /// through the ring. Only for a request with no payload of its own (READ).
    static func replyBuffer(holding size: Int) -> UnsafeMutableRawPointer? {
        var room = 0
        guard let buffer = albumfs_ring_reply_buffer(&room), room >= size else { return nil }
        return buffer
    }

    /// What the ring did, for the unmount's log line (nil: no ring).
    var report: String? {
        guard let ring = active else { return nil }
        let error = albumfs_ring_entry_error(ring)
        return "requests served through io_uring: \(albumfs_ring_served(ring))"
            + (error == 0 ? "" : "; the kernel ended an entry early: \(String(cString: strerror(error)))")
    }

    /// Ends the ring's threads. After the session's loop, before
    /// fuse_session_destroy. The ring stays reachable until they are gone: a
    /// request one of them still serves replies through it (sent to
    /// /dev/fuse, that reply was lost and its thread waited for it forever).
    func stop() {
        guard let ring = active else { return }
        albumfs_ring_stop(ring)
        pointer.store(0, ordering: .releasing)
        albumfs_ring_free(ring)
    }
}
