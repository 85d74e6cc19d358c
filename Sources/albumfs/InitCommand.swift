import AlbumCore
import Glibc

/// `albumfs init [--remote s3://BUCKET/PREFIX --endpoint URL [--region R]
/// [--profile P]] [DIR]`: creates a store on purpose (private, 0700), the one
/// way besides `mount --create` and the default store that a store comes to
/// be. A store already there is left as it is. With `--remote`, the store's
/// originals are also uploaded to that bucket (SEMANTICS.md § Remote
/// storage): the bucket is made (or found) first, which proves the endpoint
/// and the keys before anything is written; given for a store that has no
/// remote yet, it attaches one, and every asset already there is queued.
struct InitCommand {
    var store: String?
    var remote: RemoteConfiguration?

    init(parsing arguments: [String]) throws(CommandFailure) {
        var reader = ArgumentReader(arguments)
        var options = RemoteArguments()
        while let argument = reader.next() {
            if try options.take(argument, from: &reader) { continue }
            guard !argument.hasPrefix("-") else { throw .usage("unknown init argument \(argument)") }
            guard store == nil else { throw .usage("expected at most one DIR") }
            store = argument
        }
        remote = try options.configuration()
    }

    func run() throws(CommandFailure) -> Int32 {
        let location = try storeLocation(store)
        if let remote { try RemoteArguments.makeBucket(remote) }
        let existed = location.holdsStore
        do throws(LibraryError) {
            if !existed { try location.createDirectory() }
            let lock = try StoreLock(location: location)
            umask(0o077)
            let library = try Library(location: location, owner: Caller(uid: getuid(), gid: getgid()), create: !existed)
            if let remote {
                if let current = library.remote, current != remote {
                    throw .unusableStore("\(location.root) already has the remote \(current.url) at \(current.endpoint)")
                }
                try library.setRemote(remote, everyAsset: existed)
            }
            withExtendedLifetime(lock) {}
        } catch {
            throw CommandFailure(.unusableStore, describe(error))
        }
        switch (existed, remote) {
        case (true, nil): print("\(location.root) already holds an albumfs store; left as it is")
        case (true, let remote?): print("\(location.root): originals now also go to \(remote.url) (every asset is queued)")
        case (false, nil): print("created an albumfs store at \(location.root)")
        case (false, let remote?): print("created an albumfs store at \(location.root), its originals also in \(remote.url)")
        }
        return ExitCode.success.rawValue
    }
}
