import Glibc

/// A mounted library's count of files still to be read (the root's
/// `user.albumfs.indexing`) or uploaded (`user.albumfs.uploading`), and
/// waiting for it to reach 0: `albumfs index --wait`, `albumfs sync --wait`,
/// and `albumfs import` before it collects the library's hashes.
enum IndexingWait {
    enum Outcome: Equatable {
        case done
        /// The count when the time was up.
        case timedOut(Int)
        /// No count: not a mounted albumfs library.
        case notALibrary
        /// A signal arrived (Interruption).
        case interrupted
    }

    static func pending(_ root: BytePath, counting attribute: String = "user.albumfs.indexing") -> Int? {
        root.extendedAttribute(attribute).flatMap { Int($0) }
    }

    /// Polls every 50 ms for at most `timeout` seconds; `waiting(n)` is told
    /// the count once, the first time it has to wait.
    static func wait(for root: BytePath, counting attribute: String = "user.albumfs.indexing", timeout: Double,
                     waiting: (Int) -> Void = { _ in }) -> Outcome {
        let deadline = monotonicSeconds() + timeout
        var told = false
        while true {
            guard let left = pending(root, counting: attribute) else { return .notALibrary }
            if left == 0 { return .done }
            if Interruption.received != nil { return .interrupted }
            if monotonicSeconds() >= deadline { return .timedOut(left) }
            if !told { waiting(left); told = true }
            usleep(50_000)
        }
    }
}

/// Seconds on the monotonic clock.
func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}
