import AlbumCore
import Glibc

/// `albumfs remote attach s3://BUCKET/PREFIX --endpoint URL [--region R]
/// [--profile P] [--store DIR] [--no-upload]`: gives an existing library a
/// remote (SEMANTICS.md § Remote storage) and uploads every original now,
/// with a progress line, instead of at the next mount. The bucket is made or
/// found first (endpoint and keys proved before anything is written); the
/// store must not be mounted (a running mount would not start uploading).
/// Ctrl-C stops it: what is left is kept and goes at the next mount, or at
/// the next `remote attach` (exit 130). `--no-upload`: attach only.
struct RemoteAttachCommand {
    var store: String?
    var remote: RemoteConfiguration
    var upload = true

    init(parsing arguments: [String]) throws(CommandFailure) {
        var reader = ArgumentReader(arguments)
        guard reader.next() == "attach" else { throw .usage("remote takes one command: attach") }
        var options = RemoteArguments()
        while let argument = reader.next() {
            if try options.take(argument, from: &reader) { continue }
            if argument.hasPrefix("--store") { store = try reader.value(of: "--store", in: argument); continue }
            if argument == "--no-upload" { upload = false; continue }
            guard !argument.hasPrefix("-"), options.url == nil else { throw .usage("unknown remote attach argument \(argument)") }
            options.url = argument
        }
        guard let remote = try options.configuration() else { throw .usage("remote attach needs s3://BUCKET/PREFIX and --endpoint URL") }
        self.remote = remote
    }

    func run() throws(CommandFailure) -> Int32 {
        let location = try storeLocation(store)
        guard location.holdsStore else { throw CommandFailure(.unusableStore, "there is no store at \(location.root) (albumfs init makes one)") }
        let lock: StoreLock
        do { lock = try StoreLock(location: location) } catch { throw CommandFailure(.unusableStore, describe(error)) }
        try RemoteArguments.makeBucket(remote)
        Interruption.install()
        let library: Library
        do throws(LibraryError) {
            umask(0o077)
            let owner = Caller(uid: getuid(), gid: getgid())
            let before = try Library(location: location, owner: owner)
            if let current = before.remote, current != remote {
                throw .unusableStore("\(location.root) already has the remote \(current.url) at \(current.endpoint)")
            }
            if before.remote == nil { try before.setRemote(remote, everyAsset: true) }
            // Opened again: a library reads its remote when it opens.
            library = before.remote == nil ? try Library(location: location, owner: owner) : before
        } catch {
            throw CommandFailure(.unusableStore, describe(error))
        }
        defer { withExtendedLifetime(lock) {} }
        guard upload else {
            print("\(location.root): originals now also go to \(remote.url) (every asset is queued; they go at the next mount)")
            return ExitCode.success.rawValue
        }
        let attached = library
        let backend = try RemoteConnection.backend(for: remote)
        // One writer: a store that holds the bucket's lease (mounted elsewhere) refuses the uploads.
        let lease = Lease(bucket: backend, url: remote.url, holder: try holderID(location), duration: 60)
        do { try lease.acquire() } catch { throw CommandFailure(.unusableStore, error.description) }
        lease.startRenewing(log: { toStandardError("albumfs: \($0)\n") })
        defer { lease.release() }
        attached.startRemoteSync(backend, lease: lease)
        defer { attached.stopRemoteSync() }
        return try waitForUploads(attached, location)
    }

    private func holderID(_ location: StoreLocation) throws(CommandFailure) -> String {
        do { return try Lease.holderID(of: location) } catch { throw CommandFailure(.unusableStore, describe(error)) }
    }

    /// A progress line (on a terminal: redrawn; else one at the end) until
    /// the queue is empty or a signal comes.
    private func waitForUploads(_ library: Library, _ location: StoreLocation) throws(CommandFailure) -> Int32 {
        let onTerminal = isatty(STDERR_FILENO) == 1
        let total: StoreStatistics
        do { total = try StoreStatistics.read(location) } catch { throw CommandFailure(.unusableStore, describe(error)) }
        while true {
            let now = (try? StoreStatistics.read(location)) ?? total
            let done = total.uploadsPending - now.uploadsPending
            if onTerminal {
                let failing = library.lastRemoteError.map { " — waiting for the store: \($0)" } ?? ""
                toStandardError("\ruploading to \(remote.url): \(done)/\(total.uploadsPending) originals, "
                                + "\((total.uploadBytesPending - now.uploadBytesPending) >> 20)/\(total.uploadBytesPending >> 20) MiB\(failing)\u{1b}[K")
            }
            if now.uploadsPending == 0 {
                if onTerminal { toStandardError("\n") }
                print("\(location.root): every original is in \(remote.url) (\(total.uploadsPending) uploaded)")
                return ExitCode.success.rawValue
            }
            if let signal = Interruption.received {
                if onTerminal { toStandardError("\n") }
                print("\(location.root): stopped with \(now.uploadsPending) originals waiting; they go at the next mount "
                      + "(or run remote attach again)")
                return 128 + signal
            }
            usleep(200_000)
        }
    }
}
