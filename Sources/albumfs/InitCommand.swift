import AlbumCore
import Glibc

/// `albumfs init [DIR]`: creates a store on purpose (private, 0700), the one
/// way besides `mount --create` and the default store that a store comes to
/// be. A store already there is left as it is.
struct InitCommand {
    let store: String?

    init(parsing arguments: [String]) throws(CommandFailure) {
        guard arguments.count <= 1, !(arguments.first?.hasPrefix("-") ?? false) else {
            throw .usage("expected at most one DIR")
        }
        store = arguments.first
    }

    func run() throws(CommandFailure) -> Int32 {
        let location = try storeLocation(store)
        if location.holdsStore {
            print("\(location.root) already holds an albumfs store; left as it is")
            return ExitCode.success.rawValue
        }
        do {
            try location.createDirectory()
            let lock = try StoreLock(location: location)
            umask(0o077)
            _ = try Library(location: location, owner: Caller(uid: getuid(), gid: getgid()), create: true)
            withExtendedLifetime(lock) {}
        } catch {
            throw CommandFailure(.unusableStore, describe(error))
        }
        print("created an albumfs store at \(location.root)")
        return ExitCode.success.rawValue
    }
}
