import AlbumCore
import Glibc

/// `albumfs refresh MOUNTPOINT`: a second device's mount (`albumfs mount
/// --remote … -o ro`) takes the bucket's newest snapshot now, without a
/// remount (SEMANTICS.md § Surviving the machine). The daemon does it when
/// the root's `user.albumfs.refresh` is read, and answers what it did;
/// when this returns, every path of the mount shows the new snapshot.
struct RefreshCommand {
    var mountPoint: String

    init(parsing arguments: [String]) throws(CommandFailure) {
        guard arguments.count == 1, let only = arguments.first, !only.hasPrefix("-") else {
            throw .usage("usage: albumfs refresh MOUNTPOINT")
        }
        mountPoint = only
    }

    func run() throws(CommandFailure) -> Int32 {
        let root = BytePath(StoreLocation(path: mountPoint).root)
        // Read once, with room for any answer (a second read would refresh again).
        guard let answer = root.extendedAttributeBytes("user.albumfs.refresh", capacity: 65536).map({ String(decoding: $0, as: UTF8.self) }) else {
            throw CommandFailure(.usage, "\(mountPoint) is not a second device's mount (albumfs mount --remote … -o ro): a library's own mount is always current")
        }
        if answer.hasPrefix("failed: ") {
            throw CommandFailure(.problemsFound, String(answer.dropFirst("failed: ".count)))
        }
        print(answer)
        return ExitCode.success.rawValue
    }
}
