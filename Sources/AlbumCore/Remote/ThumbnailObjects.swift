#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Digests
import Synchronization

/// The thumbnails stored in the bucket beside their originals
/// (SEMANTICS.md § Thumbnails, "In the bucket"): `thumbnails/AB/SHA256.png`,
/// named by the original's object, so that a store recovered from the
/// bucket (a second device, `albumfs recover`) shows a folder of photos
/// without downloading them. The writer stores them after its uploads and
/// snapshots; the snapshot records each one's SHA-256, which a reader
/// checks. One goes when its object does.
enum ThumbnailObjects {
    static func key(of objectSHA256: String) -> String { "thumbnails/\(objectSHA256.prefix(2))/\(objectSHA256).png" }

    /// How long a listing waits for the thumbnails it fetches, at most.
    static let listingWait = 1.0
    /// How many thumbnails a listing fetches at once (the backend's fetch connections).
    static let fetchersAtOnce = 3
    /// After a fetch fails (unreachable, refused), listings fetch none for this long.
    static let pauseAfterFailure = 60.0
}

extension RemoteSync {
    /// How many thumbnails one step stores (a PUT of a few KiB each: round trips).
    static let thumbnailsAtOnce = 32

    /// Stores `thumbnails` in the bucket, spread over the upload lanes, each
    /// recorded once it is there.
    func storeThumbnails(_ thumbnails: [(asset: NodeID, object: String, png: [UInt8])], _ library: Library) -> Outcome {
        onUploadLanes(thumbnails) { [self] item in
            do {
                try backend.put(ThumbnailObjects.key(of: item.object), bytes: item.png)
                let sha256 = SHA256.hex(SHA256.digest(item.png))
                try record(library) { db in try db.setThumbnailStored(item.asset, object: item.object, sha256: sha256) }
                return .did
            } catch {
                return .failed("thumbnail of asset \(item.asset): \(error)")
            }
        }
    }
}

extension Library {
    /// Brings `wanted`, thumbnails the bucket holds and this store lacks (a
    /// store recovered from the bucket: `thumbnailPlaces`), checked against
    /// their recorded SHA-256, and keeps them. A listing waits for them at most
    /// `ThumbnailObjects.listingWait` (those later are kept for the next);
    /// after a failed fetch none is tried for `pauseAfterFailure`, so that a
    /// listing of an unreachable bucket's library does not wait on it.
    /// Returns the assets whose thumbnail is here now.
    func fetchThumbnails(_ wanted: [(asset: NodeID, object: String, sha256: String)]) -> Set<NodeID> {
        guard let sync = remoteSync.withLock({ $0 }), sync.thumbnailFetchesPausedUntil.withLock({ $0 }) <= WaitableValue<Int>.now() else {
            return []
        }
        let fetched = Mutex<Set<NodeID>>([])
        let done = DispatchGroup()
        let (backend, log) = (sync.backend, options.log)
        // A few fetchers, each taking the next thumbnail: bounded threads, whatever the listing's size.
        let next = Atomic<Int>(0)
        for _ in 0..<min(wanted.count, ThumbnailObjects.fetchersAtOnce) {
            DispatchQueue.global(qos: .userInitiated).async(group: done) { [weak self] in
                while true {
                    let index = next.add(1, ordering: .relaxed).oldValue
                    guard index < wanted.count, sync.thumbnailFetchesPausedUntil.withLock({ $0 }) <= WaitableValue<Int>.now() else { return }
                    let item = wanted[index]
                    let png: [UInt8]?
                    do {
                        png = try backend.getForReader(ThumbnailObjects.key(of: item.object))
                    } catch {
                        let first = sync.thumbnailFetchesPausedUntil.withLock { until in
                            defer { until = WaitableValue<Int>.now() + ThumbnailObjects.pauseAfterFailure }
                            return until <= WaitableValue<Int>.now()
                        }
                        if first { log("thumbnails: the bucket did not answer (\(error)); none fetched for \(Int(ThumbnailObjects.pauseAfterFailure)) s") }
                        return
                    }
                    guard let png, SHA256.hex(SHA256.digest(png)) == item.sha256 else {
                        log("thumbnails: the bucket's thumbnail of asset \(item.asset) is not the one recorded; not used")
                        continue
                    }
                    // (Its SHA-256 is the one recorded: not stored anew.)
                    guard let self, (try? self.write(behindRequests: true, { db in try db.setThumbnail(item.asset, png) })) != nil else { return }
                    fetched.withLock { _ = $0.insert(item.asset) }
                }
            }
        }
        _ = done.wait(timeout: .now() + ThumbnailObjects.listingWait)
        return fetched.withLock { $0 }
    }
}
