import AlbumCore
import Dispatch

/// Purges what expires in Recently Deleted while the library stays mounted
/// (the mount itself purges what expired before). Runs on its own queue,
/// outside any request, so it may send name invalidations directly.
final class ExpiryTimer: @unchecked Sendable {
    /// At least hourly, as SEMANTICS.md § Recently Deleted asks.
    static let interval: DispatchTimeInterval = .seconds(3600)
    private let timer: DispatchSourceTimer

    init(fileSystem: FileSystem) {
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "albumfs.expiry"))
        timer.schedule(deadline: .now() + Self.interval, repeating: Self.interval)
        timer.setEventHandler { [weak fileSystem] in
            guard let fileSystem, !fileSystem.library.isReadOnly else { return }
            do throws(LibraryError) {
                let changes = try fileSystem.library.purgeExpired()
                fileSystem.invalidator.beforeReply(changes)
            } catch {
                Log.error("purging expired assets failed: \(error)")
            }
        }
    }

    func start() { timer.resume() }
    func stop() { timer.cancel() }
}
