import AlbumCore
import Glibc

/// `albumfs make-store STORE [--assets N] [--album-size K] [--album-name NAME]
/// [--size BYTES] [--remote-only s3://BUCKET/PREFIX --endpoint URL]` and `albumfs make-store --forget-facts STORE`: hidden
/// commands for the benchmark and the scale tests (Library.generateAssets):
/// a store of N assets made through the library itself, created first if
/// missing (with `--remote-only`, every asset as if uploaded there and
/// evicted); or a store's facts forgotten (a cold read of them all).
struct MakeStoreCommand {
    var store = ""
    var assets = 1_000_000
    var albumSize: Int?
    var albumName = "Big"
    var size: Int64 = 0
    var forgetFacts = false
    var remoteOnly: String?
    var endpoint: String?

    init(parsing arguments: [String]) throws(CommandFailure) {
        var rest = arguments[...]
        func value(_ option: String) throws(CommandFailure) -> String {
            guard let value = rest.popFirst() else { throw .usage("\(option) needs a value") }
            return value
        }
        func number(_ option: String) throws(CommandFailure) -> Int {
            guard let n = Int(try value(option)), n >= 0 else { throw .usage("\(option) needs a number") }
            return n
        }
        var positional: [String] = []
        while let argument = rest.popFirst() {
            switch argument {
            case "--assets": assets = try number(argument)
            case "--album-size": albumSize = try number(argument)
            case "--album-name": albumName = try value(argument)
            case "--size": size = Int64(try number(argument))
            case "--forget-facts": forgetFacts = true
            case "--remote-only": remoteOnly = try value(argument)
            case "--endpoint": endpoint = try value(argument)
            default:
                if argument.hasPrefix("-") { throw .usage("make-store: unknown option \(argument)") }
                positional.append(argument)
            }
        }
        guard positional.count == 1 else { throw .usage("make-store: expected one STORE") }
        store = positional[0]
        guard (remoteOnly == nil) == (endpoint == nil) else { throw .usage("make-store: --remote-only and --endpoint go together") }
    }

    func run() throws(CommandFailure) -> Int32 {
        let location = StoreLocation(path: store)
        let owner = Caller(uid: getuid(), gid: getgid())
        let albumSize = self.albumSize ?? min(100_000, assets)
        do {
            if !location.holdsStore && !forgetFacts { try location.createDirectory() }
            let lock = try StoreLock(location: location)
            let library = try Library(location: location, owner: owner, create: !forgetFacts)
            try withExtendedLifetime(lock) { () throws(LibraryError) in
                if forgetFacts {
                    try library.forgetAllFacts()
                    print("make-store: \(location.root): facts forgotten")
                    return
                }
                let remote = remoteOnly.flatMap { url in endpoint.map { RemoteConfiguration(url: url, endpoint: $0, region: "us-east-1", profile: nil) } }
                let ids = try library.generateAssets(count: assets, size: size, albumName: albumSize > 0 ? Array(albumName.utf8) : nil,
                                                     albumSize: albumSize, remoteOnly: remote, by: owner)
                let range = ids.map { " (ids \($0.lowerBound)..\($0.upperBound), \(size) bytes each)" } ?? ""
                print("make-store: \(location.root): \(assets) assets\(range)" + (albumSize > 0 ? ", album Albums/\(albumName) of \(albumSize)" : "")
                      + (remote.map { ", all only in \($0.url) (recorded, not uploaded)" } ?? ""))
            }
        } catch .exists {
            throw CommandFailure(.unusableStore, "\(location.root) already holds assets or albums; give a new store")
        } catch {
            throw CommandFailure(.unusableStore, describe(error))
        }
        return ExitCode.success.rawValue
    }
}
