import AlbumCore
import Synchronization

/// When the kernel may keep a computed view's listing.
///
/// A view's entries change with what albumfs learns of its assets, in the
/// background as well as in requests, and no request tells the kernel that a
/// name appeared in a view. So a view's listing is kept (cache_readdir +
/// keep_cache at opendir) only while nothing in the library has changed
/// since the kernel began reading it: the library's change count, read
/// before the listing's first query, is kept per directory; an opendir that
/// finds the count moved on replies without keep_cache, and the kernel drops
/// its cached listing and asks again. Coarse (any change at all re-reads a
/// view once), but it cannot miss one; and a view listed again with nothing
/// changed costs one request, like an album.
final class ViewListings: Sendable {
    private let readAt = Mutex<[NodeID: UInt64]>([:])

    /// The kernel asks for `directory`'s listing from the start; `changeCount`
    /// was read before anything of it is queried.
    func reading(_ directory: NodeID, changeCount: UInt64) {
        readAt.withLock { $0[directory] = changeCount }
    }

    /// Whether a listing of `directory` the kernel may hold is still right.
    func isCurrent(_ directory: NodeID, changeCount: UInt64) -> Bool {
        readAt.withLock { $0[directory] } == changeCount
    }
}
