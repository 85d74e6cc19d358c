#if canImport(Glibc)
import Glibc
#endif

/// The content directory: one file per asset, named after the asset's id in
/// fan-out directories (`content/7f/000000000000047f`), never after a user's
/// name, so no name can reach outside the store.
public struct ContentStore: Sendable {
    public let directory: String

    public init(directory: String) { self.directory = directory }

    /// A file every content directory carries, telling it from an empty or
    /// foreign directory (see StoreOpener).
    public static let markerName = ".albumfs-content"
    /// Where data on its way in from the bucket, or out of the cache, waits
    /// (`.transfers/fetch-ID`, `.transfers/evict-ID`): never an asset's file.
    static let transfersName = ".transfers"
    public var markerPath: String { directory + "/" + Self.markerName }

    /// 256 fan-out directories by the id's low byte, so sequential ids spread evenly.
    public func fanOutName(of id: NodeID) -> String { hex(id & 0xff, width: 2) }

    public func path(of id: NodeID) -> String {
        "\(directory)/\(fanOutName(of: id))/\(hex(id, width: 16))"
    }

    /// Parses a content file's name back into its id (nil: not one of ours).
    public static func id(fromFileName name: String) -> NodeID? {
        guard name.utf8.count == 16 else { return nil }
        return NodeID(name, radix: 16)
    }

    /// Creates the directory and its fan-out subdirectories in a new store.
    /// The marker that says this content directory is its store's (StoreOpener).
    func createMarker() throws(LibraryError) {
        let fd = Glibc.open(markerPath, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw LibraryError(errno: errno) }
        close(fd)
    }

    func createLayout() throws(LibraryError) {
        try makeDirectory(directory)
        for byte in 0..<256 {
            try makeDirectory("\(directory)/\(hex(UInt64(byte), width: 2))")
        }
    }

    private func makeDirectory(_ path: String) throws(LibraryError) {
        if mkdir(path, 0o700) != 0 && errno != EEXIST { throw LibraryError(errno: errno) }
    }

    /// Creates an empty content file for a new asset. A file already there is
    /// the leftover of a create whose transaction never committed (its id was
    /// handed out again), so it is emptied, not refused.
    /// Its mtime is `modified`, the new row's (see `setModificationTime`).
    /// `sparseSize`: the file is that long, a hole (generated stores).
    func create(_ id: NodeID, contents: [UInt8] = [], sparseSize: Int64 = 0, modified: Nanoseconds) throws(LibraryError) {
        let fd = try syscall { Glibc.open(path(of: id), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600) }
        defer { close(fd) }
        if sparseSize > 0 { try syscall { ftruncate(fd, off_t(sparseSize)) } }
        var written = 0
        while written < contents.count {
            let n = try syscall { contents.withUnsafeBytes { pwrite(fd, $0.baseAddress! + written, contents.count - written, off_t(written)) } }
            written += n
        }
        try Self.setModificationTime(of: fd, to: modified)
    }

    /// Sets the data's mtime (its atime stays). A content file's mtime is its
    /// asset's live mtime: whatever sets the asset's mtime (a create, a write
    /// through the daemon, setattr, a truncate) stamps it here, writes
    /// through passthrough stamp it themselves (and the asset takes it from
    /// there), and the mark of a write stamps it once more (for stores older
    /// than this rule). So a mount after a lost release, which takes size and
    /// mtime from the data (StoreRecovery), shows what `stat` last showed,
    /// with no clocks to compare.
    func setModificationTime(_ id: NodeID, to time: Nanoseconds) throws(LibraryError) {
        var times = Self.times(modified: time)
        do {
            try syscall { utimensat(AT_FDCWD, path(of: id), &times, 0) }
        } catch .notFound {
            throw .missingData(id)
        }
    }

    /// `setModificationTime` of an open content file.
    static func setModificationTime(of descriptor: Int32, to time: Nanoseconds) throws(LibraryError) {
        var times = Self.times(modified: time)
        try syscall { futimens(descriptor, &times) }
    }

    /// utimensat's times: atime as it is (UTIME_OMIT, a macro Swift does not import), mtime `modified`.
    private static func times(modified: Nanoseconds) -> [timespec] {
        let (seconds, nanoseconds) = modified.quotientAndRemainder(dividingBy: 1_000_000_000)
        let mtime = nanoseconds < 0 ? timespec(tv_sec: Int(seconds - 1), tv_nsec: Int(nanoseconds + 1_000_000_000))
                                    : timespec(tv_sec: Int(seconds), tv_nsec: Int(nanoseconds))
        return [timespec(tv_sec: 0, tv_nsec: (1 << 30) - 2), mtime]
    }

    /// Makes the creation of an asset's content file durable.
    func synchronizeDirectory(of id: NodeID) throws(LibraryError) {
        let fd = try syscall { Glibc.open("\(directory)/\(fanOutName(of: id))", O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { close(fd) }
        try syscall { fsync(fd) }
    }

    /// Opens an asset's data for reading and writing.
    /// A listed asset without its file is `.missingData`, never "not found".
    public func open(_ id: NodeID, writable: Bool) throws(LibraryError) -> Int32 {
        let flags = (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC
        do {
            return try syscall { Glibc.open(path(of: id), flags) }
        } catch .notFound {
            throw .missingData(id)
        }
    }

    /// The largest size a file may have on the content directory's filesystem
    /// (its `s_maxbytes`: a bigger truncate is EFBIG there, as on ext4). The
    /// kernel says it only by refusing, so an unnamed O_TMPFILE file is cut to
    /// sizes by bisection: ~63 `ftruncate`s of a sparse file, no data written,
    /// nothing left behind even on a crash. Int64.max when it cannot be told
    /// (a filesystem without O_TMPFILE, a read-only store).
    func largestFileSize() -> Int64 {
        // O_TMPFILE (__O_TMPFILE | O_DIRECTORY) is a _GNU_SOURCE macro the Glibc module lacks.
        let fd = Glibc.open(directory, 0o20_200_000 | O_RDWR | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return Int64.max }
        defer { close(fd) }
        func fits(_ size: Int64) -> Bool {
            while true {
                if ftruncate(fd, off_t(size)) == 0 { return true }
                if errno != EINTR { return false }
            }
        }
        if fits(Int64.max) { return Int64.max }
        var (fitting, tooLarge) = (Int64(0), Int64.max)
        while tooLarge - fitting > 1 {
            let middle = fitting + (tooLarge - fitting) / 2
            if fits(middle) { fitting = middle } else { tooLarge = middle }
        }
        return fitting
    }

    func truncate(_ id: NodeID, to size: Int64) throws(LibraryError) {
        do {
            try syscall { Glibc.truncate(path(of: id), off_t(size)) }
        } catch .notFound {
            throw .missingData(id)
        }
    }

    /// Frees an asset's data. Missing data is not an error: the row is what counts.
    /// Removes an asset's data; `emptyingFirst`: cut to 0 before, so that
    /// its blocks are free even while some descriptor still holds the file.
    func remove(_ id: NodeID, emptyingFirst: Bool = false) {
        if emptyingFirst { _ = Glibc.truncate(path(of: id), 0) }
        unlink(path(of: id))
    }

    /// The size of an asset's data on disk, or nil when the file is missing.
    public func size(of id: NodeID) -> Int64? {
        var info = stat()
        guard lstat(path(of: id), &info) == 0 else { return nil }
        return Int64(info.st_size)
    }

    /// The size and mtime of an asset's data, nil if it has none.
    public func stamp(of id: NodeID) -> ContentStamp? {
        var info = stat()
        guard lstat(path(of: id), &info) == 0 else { return nil }
        return ContentStamp(info)
    }

    /// Calls `body` with the id and size of every content file; names that are
    /// not ids are reported with a nil id.
    public func forEachFile(_ body: (_ path: String, _ id: NodeID?, _ size: Int64) -> Void) throws(LibraryError) {
        for sub in try entries(of: directory) where sub != Self.markerName && sub != Self.transfersName {
            let subPath = "\(directory)/\(sub)"
            guard let names = try? entries(of: subPath) else {
                body(subPath, nil, 0)
                continue
            }
            for name in names {
                let filePath = "\(subPath)/\(name)"
                var info = stat()
                let size = lstat(filePath, &info) == 0 ? Int64(info.st_size) : 0
                let id = Self.id(fromFileName: name).flatMap { fanOutName(of: $0) == sub ? $0 : nil }
                body(filePath, id, size)
            }
        }
    }

    /// Removes the whole content directory: its files, the fan-out and
    /// transfer directories, the marker (a mirror's cache rebuilt from a newer
    /// snapshot; never a library's own store).
    func removeEverything() throws(LibraryError) {
        for sub in try entries(of: directory) {
            let subPath = "\(directory)/\(sub)"
            if let names = try? entries(of: subPath) {
                for name in names { _ = unlink("\(subPath)/\(name)") }
                _ = rmdir(subPath)
            } else {
                _ = unlink(subPath)
            }
        }
        if rmdir(directory) != 0 && errno != ENOENT { throw LibraryError(errno: errno) }
    }

    /// Whether any asset data is there (stops at the first file found).
    func holdsAnyData() throws(LibraryError) -> Bool {
        for sub in try entries(of: directory) where sub != Self.markerName && sub != Self.transfersName {
            if let names = try? entries(of: "\(directory)/\(sub)"), !names.isEmpty { return true }
        }
        return false
    }

    private func entries(of path: String) throws(LibraryError) -> [String] {
        guard let dir = opendir(path) else { throw LibraryError(errno: errno) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    // MARK: transfers (SEMANTICS.md § Remote storage)

    var transfersPath: String { directory + "/" + Self.transfersName }
    func fetchPath(of id: NodeID) -> String { "\(transfersPath)/fetch-\(hex(id, width: 16))" }
    func evictPath(of id: NodeID) -> String { "\(transfersPath)/evict-\(hex(id, width: 16))" }

    /// A new, empty file for data coming from the bucket (made over a leftover).
    func createFetchFile(_ id: NodeID) throws(LibraryError) -> Int32 {
        try makeDirectory(transfersPath)
        return try syscall { Glibc.open(fetchPath(of: id), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600) }
    }

    /// A read-only descriptor of the data coming from the bucket (a reader's,
    /// served as it arrives).
    func openFetchFile(_ id: NodeID) throws(LibraryError) -> Int32 {
        try syscall { Glibc.open(fetchPath(of: id), O_RDONLY | O_CLOEXEC) }
    }

    /// The fetched data becomes the asset's.
    func installFetched(_ id: NodeID) throws(LibraryError) {
        try syscall { Glibc.rename(fetchPath(of: id), path(of: id)) }
    }

    /// Moves the asset's data aside, to be removed once its eviction commits.
    func setAsideForEviction(_ id: NodeID) throws(LibraryError) {
        try makeDirectory(transfersPath)
        try syscall { Glibc.rename(path(of: id), evictPath(of: id)) }
    }

    /// Puts it back (the eviction did not commit).
    func restoreEvicted(_ id: NodeID) {
        _ = Glibc.rename(evictPath(of: id), path(of: id))
    }

    func removeTransfer(_ path: String) {
        _ = Glibc.unlink(path)
    }

    /// What a crash left in transfers: (ids set aside for eviction, fetch files).
    func leftoverTransfers() -> (evicting: [NodeID], fetching: [String]) {
        guard let names = try? entries(of: transfersPath) else { return ([], []) }
        var evicting: [NodeID] = [], fetching: [String] = []
        for name in names {
            if name.hasPrefix("evict-"), let id = Self.id(fromFileName: String(name.dropFirst(6))) { evicting.append(id) }
            else { fetching.append("\(transfersPath)/\(name)") }
        }
        return (evicting, fetching)
    }
}

func hex(_ value: UInt64, width: Int) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: max(0, width - digits.count)) + digits
}

/// What a content file says about its data: its size and mtime.
public struct ContentStamp: Equatable, Sendable {
    public let size: Int64
    public let modified: Nanoseconds

    init(size: Int64, modified: Nanoseconds) {
        self.size = size
        self.modified = modified
    }

    init(_ info: stat) {
        self.init(size: Int64(info.st_size),
                  modified: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec))
    }

    /// The stamp of an open content file.
    init?(descriptor: Int32) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        self.init(info)
    }
}
