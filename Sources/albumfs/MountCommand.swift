import AlbumCore
import AlbumFUSE
import Glibc

/// `albumfs mount [--store DIR] [--create] [-f] [-d] [-s] [-o OPTS] MOUNTPOINT`,
/// and the `albumfs STORE MOUNTPOINT -o OPTS` form that mount.fuse3 and fstab use.
///
/// A named store must exist (`albumfs init`, or `--create`): a typo or a disk
/// that is not plugged in never mounts a new, empty library. The default store
/// (no `--store`) is created on first use.
///
/// Without -f the command starts a daemon (this binary again, in the
/// foreground form with the store's absolute path, so `ps` shows which
/// library it serves) and returns once the daemon reports the mount live, or
/// exits with the daemon's one-line reason.
struct MountCommand {
    var store: String?
    var mountPoint: String
    var foreground = false
    var debug = false
    var singleThreaded = false
    var optionLists: [String] = []
    /// `--create`: make the store when none is there.
    var createStore = false
    /// Internal: the daemon reports "ready" or its failure on this descriptor.
    var readyDescriptor: Int32?
    /// `--remote s3://… --endpoint URL [--cache DIR]`: a second device's
    /// read-only view of a library in a bucket, no store of its own (SEMANTICS.md
    /// § Surviving the machine); its cache directory (default
    /// `${XDG_CACHE_HOME:-~/.cache}/albumfs/BUCKET/PREFIX`) is `store`.
    var mirror: RemoteConfiguration?
    private var remoteArguments = RemoteArguments()

    init(parsing arguments: [String], storeAsArgument: Bool) throws(CommandFailure) {
        var reader = ArgumentReader(arguments)
        var positionals: [String] = []
        var store: String?
        while let argument = reader.next() {
            switch argument {
            case "-f", "--foreground": foreground = true
            case "-d", "--debug": debug = true; foreground = true
            case "-s": singleThreaded = true
            case "--create": createStore = true
            case _ where argument.hasPrefix("--store"):
                store = try reader.value(of: "--store", in: argument)
            case _ where argument.hasPrefix("--ready-fd"):
                guard let fd = Int32(try reader.value(of: "--ready-fd", in: argument)) else { throw .usage("bad --ready-fd") }
                readyDescriptor = fd
            case _ where argument.hasPrefix("-o"):
                optionLists.append(try reader.value(of: "-o", in: argument))
            case _ where argument.hasPrefix("--cache"):
                store = try reader.value(of: "--cache", in: argument)
            case _ where try remoteArguments.take(argument, from: &reader):
                break
            case _ where argument.hasPrefix("-") && argument.count > 1:
                throw .usage("unknown option \(argument)")
            default:
                positionals.append(argument)
            }
        }
        mirror = try remoteArguments.configuration()
        if mirror != nil && storeAsArgument { throw .usage("--remote mounts a bucket, not a store") }
        if let mirror, store == nil, let cache = Self.defaultCache(of: mirror) { store = cache }
        if storeAsArgument {
            guard positionals.count == 2 else { throw .usage("expected STORE MOUNTPOINT") }
            self.store = positionals[0]
            self.mountPoint = positionals[1]
        } else {
            guard positionals.count == 1 else { throw .usage("expected one MOUNTPOINT") }
            self.store = store
            self.mountPoint = positionals[0]
        }
    }

    /// `${XDG_CACHE_HOME:-$HOME/.cache}/albumfs/BUCKET/PREFIX` for a mirror.
    static func defaultCache(of remote: RemoteConfiguration) -> String? {
        let environment = ["XDG_CACHE_HOME", "HOME"].reduce(into: [String: String]()) { found, name in
            if let value = getenv(name) { found[name] = String(cString: value) }
        }
        let base = environment["XDG_CACHE_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? environment["HOME"].map { $0 + "/.cache" }
        let path = remote.url.dropFirst("s3://".count).split(separator: "/").joined(separator: "/")
        return base.map { "\($0)/albumfs/\(path)" }
    }

    func run() throws(CommandFailure) -> Int32 {
        let options = try MountOptions(optionLists)
        if mirror != nil && !options.readOnly {
            throw CommandFailure(.usage, "a mount of a bucket without its store is read-only: add -o ro (only the library's own store writes)")
        }
        let location = try storeLocation(store)
        let mountPoint = StoreLocation(path: self.mountPoint).root
        try checkMountPoint(mountPoint)
        do {
            if creates || mirror != nil { try location.createDirectory() } else { try location.requireStore() }
        } catch {
            throw report(CommandFailure(.unusableStore, describe(error)))
        }
        if foreground || readyDescriptor != nil {
            return try serve(location, mountPoint, options)
        }
        return try DaemonLauncher(arguments: daemonArguments(location, mountPoint)).launch()
    }

    /// Whether the store is made when none is there: asked for, or the default store.
    private var creates: Bool { createStore || store == nil }

    private func checkMountPoint(_ path: String) throws(CommandFailure) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw CommandFailure(.mountFailed, "mount point \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw CommandFailure(.mountFailed, "mount point \(path) is not a directory")
        }
    }

    /// Opens the store, mounts, tells the launcher, and serves until unmounted.
    private func serve(_ location: StoreLocation, _ mountPoint: String, _ options: MountOptions) throws(CommandFailure) -> Int32 {
        let lock: StoreLock
        let session: MountSession
        var mountLease: Lease?
        var mirrorLibrary: Library?
        // Everything the daemon creates in the store is private to its owner.
        umask(0o077)
        // Its paths are absolute: it keeps no directory busy (the launcher's
        // working directory may be on a disk the user wants to unmount), and
        // neither do the processes it starts.
        _ = chdir("/")
        do {
            lock = try StoreLock(location: location, mode: options.readOnly && mirror == nil ? .readOnly : .readWrite)
            var libraryOptions = try libraryOptions(options)
            if let mirror {
                // The cache is the bucket's newest snapshot; it is written (originals
                // fetched, evicted), the mount is read-only in the kernel.
                let backend = try RemoteConnection.backend(for: mirror, readTimeout: options.remoteTimeout)
                _ = try Library.prepareMirror(at: location, of: mirror, from: backend, owner: Caller(uid: getuid(), gid: getgid()))
                libraryOptions.factsReader = nil
                let library = try Library(location: location, owner: Caller(uid: getuid(), gid: getgid()), options: libraryOptions)
                library.startRemoteSync(backend, mirror: true)
                mirrorLibrary = library
            }
            let library = try mirrorLibrary ?? Library(location: location, owner: Caller(uid: getuid(), gid: getgid()),
                                                       readOnly: options.readOnly, create: creates, options: libraryOptions)
            // Uploads go off the request threads; a remote without keys is refused here, with its reason.
            if let remote = library.remote, !options.readOnly, mirror == nil {
                let backend = try RemoteConnection.backend(for: remote, readTimeout: options.remoteTimeout)
                // One writer: another store's live lease refuses the mount here, naming it.
                if (try? backend.probeConditionalPut("lease-probe")) == false {
                    Log.error("remote: \(remote.url) ignores conditional PUTs (If-None-Match): the lease cannot keep a second writer out; mount one store at a time")
                }
                let lease = Lease(bucket: backend, url: remote.url, holder: try Lease.holderID(of: location), duration: options.leaseTime)
                do { try lease.acquire(takeOver: options.takeOver) } catch { throw CommandFailure(.unusableStore, error.description) }
                if case .pending(let why) = lease.state.withLock({ $0 }) { Log.error("remote: \(why) (uploads wait for it)") }
                library.startRemoteSync(backend, lease: lease)
                lease.startRenewing(log: { Log.error($0) })
                mountLease = lease
            }
            var configuration = MountConfiguration(store: location, mountPoint: mountPoint)
            configuration.readOnly = options.readOnly
            configuration.debug = debug
            configuration.singleThreaded = singleThreaded
            configuration.fuseOptions = options.fuseOptions
            configuration.passthrough = options.passthrough
            // -s: one thread serves every request; the ring's threads would be more.
            configuration.ring = options.ring && !singleThreaded
            if options.thumbnails {
                let environment = ["XDG_CACHE_HOME", "HOME"].reduce(into: [String: String]()) { found, name in
                    if let value = getenv(name) { found[name] = String(cString: value) }
                }
                configuration.thumbnailCache = FileManagerThumbnails.cacheDirectory(environment: environment)
                if let space = options.thumbnailSpace { configuration.thumbnailLimits.space = space }
            }
            session = try MountSession(library: library, configuration: configuration)
        } catch let error as LibraryError {
            throw report(CommandFailure(.unusableStore, describe(error)))
        } catch let failure as CommandFailure {
            throw report(failure)
        } catch let error as MountSession.Failure {
            throw report(CommandFailure(.mountFailed, error.description))
        } catch {
            throw report(CommandFailure(.mountFailed, "\(error)"))
        }
        // The watcher first, so that a mount that is ready has one (its
        // standard streams are the daemon's: /dev/null when detached). It must
        // not hold the ready pipe: the launcher reads it to its end.
        if let readyDescriptor { _ = fcntl(readyDescriptor, F_SETFD, FD_CLOEXEC) }
        ConnectionWatch.start(mountPoint: mountPoint, systemLog: readyDescriptor != nil)
        if let readyDescriptor {
            // Detached before the launcher returns: nothing is written to its
            // terminal afterwards, and the log goes where a user can find it.
            DaemonLauncher.detachStandardStreams()
            Log.useSystemLog()
            DaemonLauncher.reportReady(on: readyDescriptor)
        }
        // The mount is in the kernel's table and requests queue until the
        // loop below serves them: a unit that waits for READY may use it now.
        ServiceManager.ready(mountPoint: mountPoint)
        let status = withExtendedLifetime(lock) { session.run() }
        // After the session's end took the last snapshot: the next writer may come.
        mountLease?.release()
        ServiceManager.stopping()
        // libfuse's loop returns the signal that ended it: SIGTERM (systemctl
        // stop), SIGINT and SIGHUP are clean stops, as an unmount is.
        let cleanStops: Set<Int32> = [0, SIGTERM, SIGINT, SIGHUP]
        return cleanStops.contains(status) ? ExitCode.success.rawValue : ExitCode.problemsFound.rawValue
    }

    /// The library's options: `trash_days`, the media readers, and the clock offset tests set
    /// through `ALBUMFS_CLOCK_OFFSET` (seconds added to the store's clock).
    private func libraryOptions(_ options: MountOptions) throws(CommandFailure) -> LibraryOptions {
        var result = LibraryOptions(trashDays: options.trashDays, factsReader: IsolatedFactsReader())
        result.log = { Log.error($0) }
        result.cacheSize = options.cacheSize
        result.remoteTimeout = options.remoteTimeout
        if let text = getenv("ALBUMFS_CLOCK_OFFSET").map({ String(cString: $0) }) {
            guard let seconds = Int64(text) else { throw CommandFailure(.usage, "ALBUMFS_CLOCK_OFFSET is not a number of seconds: \(text)") }
            result.clockOffset = seconds * 1_000_000_000
        }
        return result
    }

    /// Sends a start-up failure to the launcher, if there is one, and returns it.
    private func report(_ failure: CommandFailure) -> CommandFailure {
        if let readyDescriptor { DaemonLauncher.reportFailure(failure, on: readyDescriptor) }
        return failure
    }

    private func daemonArguments(_ location: StoreLocation, _ mountPoint: String) -> [String] {
        var arguments = ["mount", "--store", location.root, "--ready-fd", String(DaemonLauncher.readyDescriptor)]
        if singleThreaded { arguments.append("-s") }
        if creates { arguments.append("--create") }
        for list in optionLists { arguments += ["-o", list] }
        if let mirror {
            arguments += ["--remote", mirror.url, "--endpoint", mirror.endpoint, "--region", mirror.region]
            if let profile = mirror.profile { arguments += ["--profile", profile] }
        }
        arguments.append(mountPoint)
        return arguments
    }
}

func describe(_ error: LibraryError) -> String {
    switch error {
    case .unusableStore(let reason): return reason
    case .database(_, let message): return "database error: \(message)"
    case .io(let code): return String(cString: strerror(code))
    default: return "\(error)"
    }
}
