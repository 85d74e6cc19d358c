#if canImport(Glibc)
import Glibc
#endif

/// Where a store's parts live. A store is a directory holding the SQLite
/// database, the content directory and a lock file.
public struct StoreLocation: Sendable {
    /// Absolute path of the store directory.
    public let root: String

    public init(path: String) {
        root = Self.absolute(path)
    }

    public var databasePath: String { root + "/library.sqlite" }
    public var walPath: String { databasePath + "-wal" }
    public var contentPath: String { root + "/content" }
    public var lockPath: String { root + "/lock" }

    /// Creates the store directory and any missing parents, private (0700).
    public func createDirectory() throws(LibraryError) {
        var prefix = ""
        for component in root.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw .unusableStore("cannot create the store directory \(prefix): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Whether a store is here (its database or its content directory), as
    /// opposed to nothing, or an empty or foreign directory.
    public var holdsStore: Bool {
        var info = stat()
        return lstat(databasePath, &info) == 0 || lstat(contentPath, &info) == 0
    }

    /// Refuses, in one line, a store that is not here: a store is created only
    /// on purpose (`albumfs init`), never because a path was mistyped or its
    /// disk is not plugged in.
    public func requireStore() throws(LibraryError) {
        if holdsStore { return }
        var info = stat()
        let what = stat(root, &info) != 0 ? "there is no albumfs store at \(root)"
            : (info.st_mode & S_IFMT) != S_IFDIR ? "\(root) is not a directory, not an albumfs store"
            : "\(root) holds no albumfs store"
        throw .unusableStore("\(what) (a typo, or its disk not plugged in?); to create one there: albumfs init \(root)")
    }

    /// A small text file of the store's own directory (`holder`, `mirror-of`); nil: none.
    func readSmallFile(_ name: String) -> String? {
        let fd = Glibc.open(root + "/" + name, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let got = read(fd, &buffer, buffer.count)
        return got >= 0 ? String(decoding: buffer[0..<got], as: UTF8.self) : nil
    }

    /// Replaces it whole (written beside it, synced, renamed over it).
    func writeSmallFile(_ name: String, _ text: String) throws(LibraryError) {
        let path = root + "/" + name
        let fd = Glibc.open(path + ".new", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw LibraryError(errno: errno) }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        guard write(fd, bytes, bytes.count) == bytes.count, fsync(fd) == 0, rename(path + ".new", path) == 0 else {
            throw LibraryError(errno: errno)
        }
    }

    /// `${XDG_DATA_HOME:-$HOME/.local/share}/albumfs`.
    public static func defaultPath(environment: [String: String]) -> String? {
        if let data = environment["XDG_DATA_HOME"], !data.isEmpty { return data + "/albumfs" }
        if let home = environment["HOME"], !home.isEmpty { return home + "/.local/share/albumfs" }
        return nil
    }

    /// Makes `path` absolute against the current directory, without resolving
    /// symlinks (the daemon chdirs to / before it uses it).
    static func absolute(_ path: String) -> String {
        var result = path
        if !path.hasPrefix("/") {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            if getcwd(&buffer, buffer.count) != nil {
                let cwd = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
                result = cwd == "/" ? "/" + path : cwd + "/" + path
            }
        }
        while result.count > 1 && result.hasSuffix("/") { result.removeLast() }
        return result
    }
}

/// An exclusive lock on a store, held for the daemon's whole life. It is an
/// flock on an open file, so it survives the daemonizing fork and is released
/// by the kernel when the daemon exits, however it exits.
public final class StoreLock: Sendable {
    private let fd: Int32

    /// How the holder uses the store, written into the lock file so that
    /// `fsck` can tell a read-only mount from a read-write one.
    public enum Mode: String, Sendable {
        case readOnly = "ro"
        case readWrite = "rw"
    }

    /// Locks the store at `location`, whose directory must exist.
    public init(location: StoreLocation, mode: Mode = .readWrite) throws(LibraryError) {
        let fd = open(location.lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw .unusableStore("cannot open the store's lock file \(location.lockPath): \(String(cString: strerror(errno)))")
        }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            close(fd)
            if code == EWOULDBLOCK {
                throw .unusableStore("the store \(location.root) is already in use by another albumfs (already mounted?)")
            }
            throw .unusableStore("cannot lock the store \(location.root): \(String(cString: strerror(code)))")
        }
        self.fd = fd
        ftruncate(fd, 0)
        var text = mode.rawValue + "\n"
        text.withUTF8 { bytes in _ = pwrite(fd, bytes.baseAddress, bytes.count, 0) }
    }

    deinit { close(fd) }

    /// The mode the current holder wrote, if any.
    public static func holderMode(_ location: StoreLocation) -> Mode? {
        let fd = open(location.lockPath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 8)
        let n = read(fd, &buffer, buffer.count)
        guard n > 0 else { return nil }
        return Mode(rawValue: String(decoding: buffer[..<n].filter { $0 != 0x0a }, as: UTF8.self))
    }
}
