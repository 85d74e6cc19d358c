import Synchronization

/// Places in the store where a test can step in, to run another operation at
/// the exact moment a race needs (a release between a setattr's commit and
/// its cut of the data, …) instead of hoping a stress test hits it. Nothing
/// is installed outside tests: each point then costs one atomic load. A
/// point is reached with no lock held, so the test may call the library,
/// except the two inside a transaction (`createBeforeCommit`,
/// `commitOfData`), where a test may only throw, as a failing COMMIT does.
public enum PausePoint: Sendable {
    /// setAttributes: the new size committed, the data not cut yet.
    case setAttributesBeforeCut
    /// attributes(of:), before the row and the open-file state are read (under
    /// one lock hold: nothing can come between them).
    case readingAttributes
    /// open: the content file open, before the handle's attributes are read
    /// and its open-file state seeded (one lock hold: nothing can come between).
    case openBeforeRegister
    /// write: the mark checked, the data not written yet.
    case writeBeforeData
    /// createAsset: the content file made, the transaction not committed yet
    /// (a test may throw here, as a failing COMMIT does).
    case createBeforeCommit
    /// A change that did not commit, its lock released, before its error is
    /// thrown (what it undid outside the database is undone by then).
    case changeRolledBack
    /// A flush, fsync or release commits an open file's size and times, in
    /// its transaction (under the database lock; a test may throw here, as
    /// a failing COMMIT does).
    case commitOfData
    /// The deferred free of a purge's data, before it runs (on its queue).
    case freeingData
    /// The uploader, about to wait for writes to settle (on its thread).
    case uploadsSettling
    /// The end of a mount: the uploader stopped, the downloads under way not
    /// waited for yet.
    case remoteSyncStopped
    /// A snapshot of the metadata, before its copy is made (on the uploader's thread).
    case snapshotStarting
    /// Inside a snapshot's read transaction, the copy under way (a test may
    /// change the library here: it must not wait for the copy).
    case snapshotCopying
    /// A second device's refresh found a download of a changed asset under
    /// way and is about to wait for it (on the refreshing thread, no lock held).
    case refreshWaitingForDownload
    /// A second device's refresh has found what the new snapshot changes,
    /// before it takes the database lock to swap (on the refreshing thread).
    case refreshCompared
}

final class PausePoints: Sendable {
    typealias Handler = @Sendable (PausePoint) throws(LibraryError) -> Void
    private let installed = Atomic<Bool>(false)
    private let handler = Mutex<Handler?>(nil)

    /// Runs `handler` at every point reached from now on (nil: none).
    func install(_ handler: Handler?) {
        self.handler.withLock { $0 = handler }
        installed.store(handler != nil, ordering: .releasing)
    }

    func reached(_ point: PausePoint) throws(LibraryError) {
        guard installed.load(ordering: .acquiring), let handler = handler.withLock({ $0 }) else { return }
        try handler(point)
    }
}
