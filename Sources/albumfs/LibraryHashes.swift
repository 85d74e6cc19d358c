import AlbumMedia
import Glibc

/// The SHA-256 of every asset in a mounted library, as its daemon knows
/// them: `user.albumfs.sha256` of each `Camera Roll/` entry, once the
/// root's `user.albumfs.indexing` (assets waiting to be read) is 0. The wait
/// is bounded; an asset still without the attribute then (or one whose
/// reading was queued a moment after the count was read, as at mount) is
/// hashed here, through the mount, so that no duplicate is ever missed.
enum LibraryHashes {
    /// How long to wait for the daemon's indexing before hashing what is
    /// left ourselves (the same work, only not twice).
    static let indexingWaitSeconds = 120.0

    /// Waits for indexing; `waiting(n)` is told how many are left when it has to wait.
    /// False when interrupted (past the bound, what is left is hashed here).
    static func waitForIndexing(of mountPoint: BytePath, waiting: (Int) -> Void) -> Bool {
        IndexingWait.wait(for: mountPoint, timeout: indexingWaitSeconds, waiting: waiting) != .interrupted
    }

    struct Collected {
        /// SHA-256 → the roll entry of an asset with that content.
        var hashes: [String: BytePath] = [:]
        /// Entries we hashed ourselves (no attribute yet).
        var hashedHere = 0
        var failures: [String] = []
    }

    /// The hashes of every roll entry. Stops early (incomplete) when interrupted.
    static func collect(roll: BytePath) -> Result<Collected, SystemError> {
        let names: [[UInt8]]
        switch roll.directoryEntries() {
        case .success(let found): names = found
        case .failure(let error): return .failure(error)
        }
        var collected = Collected()
        for name in names {
            if Interruption.received != nil { break }
            let path = roll.appending(name)
            if let hash = path.extendedAttribute("user.albumfs.sha256"), hash.utf8.count == 64 {
                collected.hashes[hash] = path
                continue
            }
            guard let info = path.status(), info.st_mode & S_IFMT == S_IFREG else { continue }
            let fd = path.withCString { open($0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
            guard fd >= 0 else { collected.failures.append("\(path): \(SystemError("open"))"); continue }
            defer { close(fd) }
            do {
                collected.hashes[try MediaReader.hashOnly(fileDescriptor: fd)] = path
                collected.hashedHere += 1
            } catch {
                collected.failures.append("\(path): \(error)")
            }
        }
        return .success(collected)
    }
}
