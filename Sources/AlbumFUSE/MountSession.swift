import AlbumCore
import CFuse3
import Glibc

/// How to mount: everything the mount command decided.
public struct MountConfiguration: Sendable {
    public var store: StoreLocation
    public var mountPoint: String
    public var readOnly = false
    public var debug = false
    public var singleThreaded = false
    /// Options for libfuse's `-o` (mount flags, allow_other, …).
    public var fuseOptions: [String] = []
    public var timeouts = CacheTimeouts()
    /// Ask the kernel for FUSE passthrough (see Passthrough.swift).
    public var passthrough = true
    /// Take requests through io_uring where the kernel offers it (`-o uring`; see DeviceChannel).
    public var ring = false
    /// The freedesktop thumbnail cache listings put thumbnails in (nil: none; FileManagerThumbnails).
    public var thumbnailCache: String?
    /// How much of it a mount may fill (`-o thumbnail_space=SIZE`).
    public var thumbnailLimits = FileManagerThumbnails.Limits()

    public init(store: StoreLocation, mountPoint: String) {
        self.store = store
        self.mountPoint = mountPoint
    }
}

/// A mounted FUSE session over a library: created and mounted by `mount`,
/// served by `run`, unmounted and torn down at the end of `run`.
public final class MountSession {
    private let session: OpaquePointer
    private let fileSystem: Unmanaged<FileSystem>
    private let configuration: MountConfiguration

    public enum Failure: Error, CustomStringConvertible {
        case options
        case mount(String)
        public var description: String {
            switch self {
            case .options: return "invalid FUSE options"
            case .mount(let message): return message
            }
        }
    }

    /// Creates the session and mounts it. On return the mount is live.
    public init(library: Library, configuration: MountConfiguration) throws(Failure) {
        self.configuration = configuration
        // nosuid,nodev always: a photo library holds no programs and no devices,
        // and a mount other users reach (allow_other) must not make one.
        var options = ["fsname=" + configuration.store.root, "subtype=albumfs", "default_permissions", "nosuid", "nodev"]
        options += configuration.fuseOptions
        // fsname may contain commas: libfuse's option syntax escapes them with a backslash.
        let optionString = options.map(escapeOption).joined(separator: ",")
        var argv = ["albumfs", "-o", optionString]
        if configuration.debug { argv.append("-d") }
        // libfuse may keep pointers into argv: these copies live as long as the process.
        let cArgs = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: argv.count + 1)
        for (index, arg) in argv.enumerated() { cArgs[index] = strdup(arg) }
        cArgs[argv.count] = nil
        var args = albumfs_fuse_args_init(Int32(argv.count), cArgs)

        let invalidator = Invalidator()
        let channel = DeviceChannel(wantsPassthrough: configuration.passthrough, wantsRing: configuration.ring)
        let fileSystem = Unmanaged.passRetained(
            FileSystem(library: library, timeouts: configuration.timeouts, invalidator: invalidator,
                       channel: channel, thumbnails: configuration.thumbnailCache.map {
                           FileManagerThumbnails(library: library, mountPoint: resolved(configuration.mountPoint), cache: $0,
                                                 limits: configuration.thumbnailLimits)
                       }))
        var ops = Operations.table()
        guard let session = fuse_session_new(&args, &ops, MemoryLayout<fuse_lowlevel_ops>.size,
                                             fileSystem.toOpaque()) else {
            fileSystem.release()
            throw .options
        }
        // libfuse and fusermount3 say why a mount fails on standard error only:
        // keep their words for the one-line reason (a detached daemon has no terminal).
        let (mounted, said) = capturingStandardError { fuse_session_mount(session, configuration.mountPoint) == 0 }
        guard mounted else {
            fuse_session_destroy(session)
            fileSystem.release()
            throw .mount(MountFailureReason(mountPoint: configuration.mountPoint, said: said).description)
        }
        guard channel.install(on: session) else {
            fuse_session_unmount(session)
            fuse_session_destroy(session)
            fileSystem.release()
            throw .mount("cannot set up the FUSE device's I/O")
        }
        invalidator.attach(session)
        self.session = session
        self.fileSystem = fileSystem
    }

    /// Serves requests until unmounted or signalled; then tears everything down.
    /// Returns the loop's status (0: clean unmount).
    public func run() -> Int32 {
        fuse_set_signal_handlers(session)
        let expiry = ExpiryTimer(fileSystem: fileSystem.takeUnretainedValue())
        expiry.start()
        let status: Int32
        if configuration.singleThreaded {
            status = fuse_session_loop(session)
        } else {
            let config = fuse_loop_cfg_create()
            fuse_loop_cfg_set_clone_fd(config, 0)
            fuse_loop_cfg_set_idle_threads(config, 10)
            status = fuse_session_loop_mt(session, config)
            fuse_loop_cfg_destroy(config)
        }
        expiry.stop()
        fuse_remove_signal_handlers(session)
        // The store is released after this returns. Background work ends
        // first, while the device is open (a delivery under way waits at
        // most its bound): no background change delivered after it, no facts
        // written after the indexer's stop. Then the device goes (so no
        // notification still queued can wait on a kernel lock), the queue
        // is drained, and the purged data is freed.
        let library = fileSystem.takeUnretainedValue().library
        library.onBackgroundChanges(nil)
        library.stopIndexing()
        library.stopRemoteSync()
        fuse_session_unmount(session)
        fileSystem.takeUnretainedValue().invalidator.drain()
        library.waitForFreedData()
        let ring = fileSystem.takeUnretainedValue().channel.ring
        if let report = ring.report { Log.info(report) }
        ring.stop()
        fuse_session_destroy(session)
        fileSystem.release()
        return status
    }
}

/// libfuse's option syntax: a comma inside a value is escaped with a backslash.
private func escapeOption(_ option: String) -> String {
    var escaped = ""
    for character in option {
        if character == "," || character == "\\" { escaped.append("\\") }
        escaped.append(character)
    }
    return escaped
}

/// `path` with its symlinks resolved (as a file manager reaches the mount); as it is if it cannot be.
private func resolved(_ path: String) -> String {
    guard let real = realpath(path, nil) else { return path }
    defer { free(real) }
    return String(cString: real)
}
