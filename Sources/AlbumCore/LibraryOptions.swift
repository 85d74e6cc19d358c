/// How a library is run: how long deleted assets are kept, its clock, and
/// what reads its assets' facts.
public struct LibraryOptions: Sendable {
    /// Days a deleted asset stays in Recently Deleted before it is purged;
    /// 0: a delete frees the asset at once, and no trash is offered.
    public var trashDays: Int
    /// Added to the system clock. Tests move the store's time with it
    /// (`ALBUMFS_CLOCK_OFFSET`) instead of waiting for days to pass.
    public var clockOffset: Nanoseconds
    /// Reads what each asset's content says (nil: nothing is read, no facts).
    public var factsReader: (any AssetFactsReader)?
    /// With a remote: the most bytes of originals kept on the local disk
    /// (`-o cache_size`); nil: every original stays local too.
    public var cacheSize: Int64?
    /// Seconds with no write committed before the uploader starts a step
    /// (RemoteSync: an import has the machine to itself; `sync --wait` skips it).
    public var uploadSettle: Double = 1
    /// With a remote: seconds with no change before the metadata's snapshot
    /// goes to the bucket, and the longest a change waits for one while
    /// changes go on (SEMANTICS.md § Surviving the machine).
    public var snapshotSettle: Double = 60
    public var snapshotInterval: Double = 600
    /// With a remote: how long a read of data only in the bucket waits with
    /// nothing coming before it fails with EIO (`-o remote_timeout`, seconds).
    public var remoteTimeout: Double = 10
    /// Where background work says what went wrong (the daemon's log).
    public var log: @Sendable (String) -> Void = { _ in }

    public init(trashDays: Int = 30, clockOffset: Nanoseconds = 0, factsReader: (any AssetFactsReader)? = nil) {
        self.trashDays = trashDays
        self.clockOffset = clockOffset
        self.factsReader = factsReader
    }

    /// How long a deleted asset is kept, or nil when deletes purge at once.
    public var retention: Nanoseconds? {
        trashDays > 0 ? Nanoseconds(trashDays) * 86_400 * 1_000_000_000 : nil
    }

    /// The store's time now.
    public func now() -> Nanoseconds { currentTime() + clockOffset }
}
