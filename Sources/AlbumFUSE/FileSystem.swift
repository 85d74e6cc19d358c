// The FUSE adapter: libfuse's low-level API over AlbumCore's Library.
//
// Inodes. A FUSE node id is the library's node id (an asset's, an album's, a
// fixed directory's): stable across remounts, never reused, the same in every
// directory that shows the node. So the adapter keeps no inode table: lookup
// counts need no bookkeeping and `forget` has nothing to free, and no file
// descriptor is held for a node that is merely looked up.
//
// Caching. Entries, attributes and directory listings are cached by the
// kernel for `timeouts` (long); misses are not cached. Whatever a
// request changes in the directories it names the kernel updates itself;
// what changes elsewhere (a create in an album adds a roll entry, a delete
// from the roll removes album entries and adds one to Recently Deleted, an
// update moves album entries to another asset) comes back from the library
// as a ChangeSet, which the Invalidator sends to the kernel before the
// reply, so that when a call returns every path shows its effect.
//
// Deadlocks. The kernel handles a notification synchronously inside the
// write to /dev/fuse. A name invalidation locks the name's directory, which
// a request in flight may hold while it waits for a reply: those are never
// sent from a request's thread or under a library lock, but by a dedicated
// queue, which the request waits for at most a bound (100 ms) before it
// replies anyway; names in the directories the request itself locked go
// after the reply. Attribute and listing invalidations take no directory
// lock and are sent from the request's thread.
//
// Each callback decodes its arguments, calls one Library method, and sends
// exactly one reply; errors become errno in one place (Errno.swift).

import AlbumCore
import CFuse3

/// What the kernel may cache, in seconds.
public struct CacheTimeouts: Sendable {
    public var entry: Double
    public var attributes: Double
    /// Long, because every change that the kernel cannot see for itself is
    /// invalidated explicitly.
    public init(entry: Double = 60, attributes: Double = 60) {
        self.entry = entry
        self.attributes = attributes
    }
}

/// The object the callbacks reach through `fuse_req_userdata`.
final class FileSystem: Sendable {
    let library: Library
    let timeouts: CacheTimeouts
    let invalidator: Invalidator
    let viewListings = ViewListings()
    let channel: DeviceChannel
    let passthrough: Passthrough
    /// Puts thumbnails where file managers look, as listings go out (nil: `-o nothumbnails`).
    let thumbnails: FileManagerThumbnails?
    /// Reported as st_blksize, which cp and cat size their buffers by (cp by
    /// its destination's, which it stats right after creating it, empty).
    /// With passthrough the data never comes here and a large value only
    /// costs: cat frees and reallocates its buffer per file, so with 1 MiB a
    /// cold `cat` of 2,000 1 MiB photos spent 1 s more in the kernel zeroing
    /// fresh pages (perf) than with the 4 KiB a plain ext4 file reports.
    /// Through the daemon, a file being written wants large writes (each
    /// write() of a direct-I/O handle is a request): an empty file, and a
    /// directory, report 1 MiB, so that `cp` writes in 1 MiB requests, not
    /// 128 KiB ones. A file with data is read through the page cache, where
    /// the size of cat's buffer makes no request bigger: it reports 4 KiB
    /// too (as a user, `cat` of 500 photos cold spent 0.37 s of system time
    /// against passthrough_ll's 0.17 s with 1 MiB). Passthrough is decided
    /// once per mount (see Passthrough.isActive).
    func preferredBlockSize(of a: Attributes) -> Int {
        passthrough.isActive || (!a.kind.isDirectory && a.size > 0) ? 4096 : 1 << 20
    }

    init(library: Library, timeouts: CacheTimeouts, invalidator: Invalidator, channel: DeviceChannel,
         thumbnails: FileManagerThumbnails? = nil) {
        self.library = library
        self.thumbnails = thumbnails
        self.timeouts = timeouts
        self.invalidator = invalidator
        self.channel = channel
        self.passthrough = Passthrough(channel: channel, probeFile: library.content.markerPath)
        // Facts read in the background change what the views show: outside
        // any request, so names may be invalidated directly.
        library.onBackgroundChanges { [invalidator] changes in invalidator.beforeReply(changes) }
    }

    /// The file system behind a request.
    static func of(_ req: fuse_req_t?) -> FileSystem {
        from(fuse_req_userdata(req))
    }

    /// The file system behind the session's userdata pointer.
    static func from(_ userdata: UnsafeMutableRawPointer?) -> FileSystem {
        Unmanaged<FileSystem>.fromOpaque(userdata!).takeUnretainedValue()
    }
}
