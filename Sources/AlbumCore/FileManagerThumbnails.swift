#if canImport(Glibc)
import Glibc
#endif
import CXattr
import Digests
import Synchronization

/// Puts the thumbnail albumfs keeps of each photo where file managers look
/// for one, so that showing a folder never reads its originals (SEMANTICS.md
/// § Thumbnails): the freedesktop thumbnail cache of the user who mounted,
/// `$XDG_CACHE_HOME/thumbnails/large/MD5(URI).png`, with the `Thumb::URI` and
/// `Thumb::MTime` text chunks GLib, Nautilus, gnome-desktop and KIO check.
///
/// A thumbnail is named by its file's URI, so every path of a photo (the
/// roll, each album, By Date, the smart albums) has its own: each is written
/// when a listing of its directory is about to be returned (GIO asks for
/// `thumbnail::path` as it enumerates; written any later, the file manager
/// would already be making its own from the original). What is written once
/// for a path and mtime is remembered (a bounded set), and found on disk at
/// the next mount (`user.albumfs.mtime` on the file, else its `Thumb::MTime`),
/// so a listing writes each thumbnail once. The file's own mtime is when it
/// was written, as for GNOME's own: its housekeeping deletes thumbnails by
/// that age (180 days) and trims the cache by it, oldest first.
///
/// Bounded (`Limits`): a mount writes at most `space` bytes of them (blocks),
/// never while the cache's file system has less than a tenth of its blocks
/// or inodes free, and remembers at most `remembered` of them; past a bound
/// listings write no more and the file manager draws its own, said once.
///
/// A file albumfs has no thumbnail of (a video, a raw, a photo whose facts
/// are not read yet) gets none while its data is local: the file manager
/// makes one from it as usual. One that is only in the bucket gets a
/// "failed" marker instead (`fail/gnome-thumbnail-factory/`), which stops
/// Nautilus from downloading it for a picture: it shows its type's icon.
public final class FileManagerThumbnails: Sendable {
    /// The mount point as the file manager sees it (absolute, symlinks resolved).
    let mountPoint: String
    /// `$XDG_CACHE_HOME/thumbnails`.
    let cache: String
    private let library: Library
    let limits: Limits
    /// What is in the cache as it must be: `key(md5:seconds:)` of each.
    /// Eight bytes a path: with 100,000 remote-only files listed in the
    /// roll and an album, a set of "MD5 mtime" strings took 31 MiB of the
    /// daemon (1.63 × a local library's RSS). At most `limits.remembered`:
    /// a full set is emptied (a listing then costs one getxattr a file),
    /// which kept a 10,000,000-file listing from growing it to 95.6 MiB.
    private let published = Mutex<Set<UInt64>>([])
    /// Bytes of the cache's disk written by this mount (whole 4 KiB blocks), counted as each file is.
    private let spent = Mutex<Int64>(0)

    /// What a mount may put in the user's cache.
    public struct Limits: Sendable {
        /// Bytes of the cache's disk a mount may fill, each file counted in
        /// whole 4 KiB blocks (`-o thumbnail_space=SIZE`). 1 GiB: twice
        /// GNOME's own bound on the whole cache (512 MB, trimmed by its
        /// housekeeping): 262,144 failed markers, or fewer thumbnails.
        public var space: Int64 = 1 << 30
        /// Never written while less than this fraction of the blocks or of
        /// the inodes of the cache's file system is free.
        public var freeFloor = 0.10
        /// Keys remembered (8 bytes each, a set of about 1 MiB; with 262,144
        /// a mount that had listed 1,000,000 remote-only files had 33.5 MiB
        /// of VmRSS, 1.26 × the same library's local).
        public var remembered = 1 << 16
        /// The fractions of blocks and of inodes free where `path` is (nil: unknown).
        public var free: @Sendable (String) -> (blocks: Double, inodes: Double)? = Limits.statfsFree

        public init() {}

        static func statfsFree(_ path: String) -> (blocks: Double, inodes: Double)? {
            var info = statvfs()
            guard statvfs(path, &info) == 0, info.f_blocks > 0 else { return nil }
            // A file system without inode counts (f_files 0: btrfs reports some, some report none).
            let inodes = info.f_files > 0 ? Double(info.f_favail) / Double(info.f_files) : 1
            return (Double(info.f_bavail) / Double(info.f_blocks), inodes)
        }
    }

    /// 64 bits of the URI's MD5 mixed with the mtime. Two paths and mtimes
    /// share one with a chance of about n² / 2⁶⁵ (10⁻⁹ for 200,000); then
    /// one thumbnail is not written and the file manager draws its own.
    static func key(md5: String, seconds: Int64) -> UInt64 {
        (UInt64(md5.prefix(16), radix: 16) ?? 0) ^ (UInt64(bitPattern: seconds) &* 0x9E37_79B9_7F4A_7C15)
    }

    public init(library: Library, mountPoint: String, cache: String, limits: Limits = Limits()) {
        self.library = library
        self.limits = limits
        self.mountPoint = mountPoint.hasSuffix("/") ? String(mountPoint.dropLast()) : mountPoint
        self.cache = cache
    }

    /// The cache GLib uses for the environment `environment`: nil if it has no home.
    public static func cacheDirectory(environment: [String: String]) -> String? {
        if let cache = environment["XDG_CACHE_HOME"], cache.hasPrefix("/") { return cache + "/thumbnails" }
        if let home = environment["HOME"], home.hasPrefix("/") { return home + "/.cache/thumbnails" }
        return nil
    }

    /// Before a listing of `directory` returns `entries`: the thumbnail of
    /// each asset among them is in the cache. Best effort: a cache that
    /// cannot be written is logged once, and the listing goes on.
    public func publish(_ directory: NodeID, _ entries: some Collection<DirectoryEntry>) {
        let assets = entries.filter { $0.attributes.kind == .asset }
        guard !assets.isEmpty, let places = try? library.thumbnailPlaces(of: assets.map(\.attributes.id)) else { return }
        // A store recovered from the bucket: the thumbnails the bucket holds (at most a second's wait).
        let drawn = places.here.union(places.inBucket.isEmpty ? [] : library.fetchThumbnails(places.inBucket))
        let inBucket = Set(places.inBucket.map(\.asset))
        // A file with no thumbnail whose data is local: nothing to do (not even a look in the cache).
        // One whose thumbnail is still on its way: nothing yet (a failed marker would stay).
        let wanted = assets.filter {
            drawn.contains($0.attributes.id) || ($0.attributes.isRemoteOnly && !inBucket.contains($0.attributes.id))
        }
        guard !wanted.isEmpty, let path = try? library.path(ofDirectory: directory) else { return }
        let prefix = Array(mountPoint.utf8) + path.flatMap { [UInt8(ascii: "/")] + $0 } + [UInt8(ascii: "/")]
        var missing: [(id: NodeID, uri: String, md5: String, seconds: Int64, key: UInt64, directory: String)] = []
        for entry in wanted {
            let uri = Self.uri(prefix + entry.name)
            let md5 = MD5.hex(Array(uri.utf8))
            let seconds = entry.attributes.modificationTime / 1_000_000_000
            let key = Self.key(md5: md5, seconds: seconds)
            if published.withLock({ $0.contains(key) }) { continue }
            let directory = cache + "/" + (drawn.contains(entry.attributes.id) ? "large" : Self.failed)
            // Written at an earlier mount, or by another mount of the same path, or by the file manager.
            if Self.holds(directory + "/" + md5 + ".png", mtime: seconds) {
                remember(key)
                continue
            }
            missing.append((entry.attributes.id, uri, md5, seconds, key, directory))
        }
        guard !missing.isEmpty, roomLeft(),
              let pngs = try? library.thumbnails(of: missing.map(\.id).filter(drawn.contains)) else { return }
        for m in missing {
            let text = ["Thumb::URI": m.uri, "Thumb::MTime": String(m.seconds), "Software": "albumfs"]
            // No thumbnail (any more): the failed marker of a file only in the bucket.
            let png = PNGText.adding(text, to: pngs[m.id] ?? PNGText.blank)
            guard spaceLeft() else { return }
            if write(png, to: m.directory, m.md5, mtime: m.seconds) {
                remember(m.key)
                spent.withLock { $0 += Int64((png.count + 4095) / 4096 * 4096) }
            }
        }
    }

    /// How many keys are remembered (for tests of the bound).
    var rememberedCount: Int { published.withLock { $0.count } }

    private func remember(_ key: UInt64) {
        published.withLock { set in
            if set.count >= limits.remembered { set.removeAll(keepingCapacity: true) }
            set.insert(key)
        }
    }

    /// Whether this mount has written less than `limits.space` (else false, said once). Listings
    /// on other threads may each write one more: the bound is passed by a file a thread at most.
    private func spaceLeft() -> Bool {
        let fits = spent.withLock { $0 < limits.space }
        if !fits {
            let size = limits.space >= 1 << 20 ? "\(limits.space >> 20) MiB" : "\(limits.space >> 10) KiB"
            sayOnce(.space, "thumbnails: this mount has written its \(size) of thumbnails "
                    + "(-o thumbnail_space=SIZE): file managers draw their own from now on")
        }
        return fits
    }

    /// Whether the cache's file system keeps a tenth (`limits.freeFloor`) of its blocks and inodes free.
    private func roomLeft() -> Bool {
        guard let free = limits.free(cache) ?? limits.free(Self.parent(of: cache)) else { return true }
        if free.blocks >= limits.freeFloor && free.inodes >= limits.freeFloor { return true }
        sayOnce(.floor, "thumbnails: less than \(Int(limits.freeFloor * 100)) % of the space or inodes of "
                + "\(cache)'s file system is free: no more are written (file managers draw their own)")
        return false
    }

    private static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    private enum Said: Hashable { case unwritable, space, floor }
    private let said = Mutex<Set<Said>>([])

    private func sayOnce(_ what: Said, _ line: String) {
        if said.withLock({ $0.insert(what).inserted }) { library.options.log(line) }
    }

    /// Where GNOME's thumbnail factory keeps its "failed" markers.
    static let failed = "fail/gnome-thumbnail-factory"

    /// `file://` and the path escaped as GLib's g_filename_to_uri does
    /// (its UNSAFE_PATH table): every byte but ASCII letters, digits and
    /// `-_.!~*'()/&=:@+$,` is `%XX`, upper case.
    static func uri(_ path: [UInt8]) -> String {
        let kept = Set("-_.!~*'()/&=:@+$,".utf8)
        let digits = Array("0123456789ABCDEF".utf8)
        var text = Array("file://".utf8)
        for byte in path {
            let alphanumeric = (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
            if alphanumeric || kept.contains(byte) {
                text.append(byte)
            } else {
                text += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 15)]]
            }
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The extended attribute that says which mtime of its photo a thumbnail
    /// file was written for, so that one getxattr tells (a listing of 3,000
    /// photos that opened and read each one's text chunks took 2.7 times as
    /// long as one with no thumbnails; with one call, about as long).
    static let mtimeAttribute = "user.albumfs.mtime"

    /// Whether the file at `path` is a thumbnail for a photo whose mtime is
    /// `mtime`: by `mtimeAttribute`, or, on a file without it (the file
    /// manager's own, or a file system without user xattrs), by its
    /// `Thumb::MTime`. Its name is the MD5 of the URI, so the URI is the one
    /// it was written for.
    static func holds(_ path: String, mtime: Int64) -> Bool {
        let expected = Array(String(mtime).utf8)
        var value = [UInt8](repeating: 0, count: 24)
        let length = getxattr(path, mtimeAttribute, &value, value.count)
        if length >= 0 { return Array(value.prefix(length)) == expected }
        guard errno == ENODATA || errno == ENOTSUP else { return false }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var head = [UInt8](repeating: 0, count: 4096)
        let count = read(fd, &head, head.count)
        guard count > 0 else { return false }
        return PNGText.chunks(in: head[..<count])["Thumb::MTime"] == String(mtime)
    }

    /// Written whole or not at all (a temporary file renamed over it), 0600
    /// in directories 0700, as the spec asks.
    private func write(_ png: [UInt8], to directory: String, _ md5: String, mtime: Int64) -> Bool {
        let target = directory + "/" + md5 + ".png"
        let temporary = directory + "/.albumfs-" + md5 + "-\(getpid()).png"
        func attempt() -> Bool {
            let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard fd >= 0 else { return false }
            let written = png.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            // The photo's mtime it is for (Thumb::MTime): how `holds` knows it in one call.
            _ = Array(String(mtime).utf8).withUnsafeBytes { fsetxattr(fd, Self.mtimeAttribute, $0.baseAddress, $0.count, 0) }
            close(fd)
            guard written == png.count, rename(temporary, target) == 0 else {
                unlink(temporary)
                return false
            }
            return true
        }
        if attempt() { return true }
        if errno == ENOENT, Self.makeDirectories(directory), attempt() { return true }
        sayOnce(.unwritable, "thumbnails: cannot write into \(directory) (\(String(cString: strerror(errno)))): "
                + "file managers will make their own")
        return false
    }

    private static func makeDirectories(_ path: String) -> Bool {
        var prefix = ""
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST { return false }
        }
        return true
    }
}

/// A PNG's `tEXt` chunks: read (the first few KiB suffice: they come before
/// the image data) and added after the header, each with its CRC.
enum PNGText {
    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// A 1 × 1 grey PNG: the body of a "failed" marker.
    static let blank: [UInt8] = {
        var png = signature
        png += chunk("IHDR", [0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0])
        // zlib stream of the one scanline (filter 0, grey 0x80), stored uncompressed.
        png += chunk("IDAT", [0x78, 0x01, 0x01, 0x02, 0x00, 0xFD, 0xFF, 0x00, 0x80, 0x00, 0x82, 0x00, 0x81])
        png += chunk("IEND", [])
        return png
    }()

    /// `png` with `text` as tEXt chunks right after its IHDR; `png` as it is if it has no IHDR first.
    static func adding(_ text: [String: String], to png: [UInt8]) -> [UInt8] {
        guard png.count > 33, png.starts(with: signature), Array(png[12..<16]) == Array("IHDR".utf8) else { return png }
        var chunks: [UInt8] = []
        for (key, value) in text.sorted(by: { $0.key < $1.key }) {
            chunks += chunk("tEXt", Array(key.utf8) + [0] + Array(value.utf8))
        }
        return Array(png[..<33]) + chunks + Array(png[33...])
    }

    /// The tEXt chunks among the chunks in `head` (a PNG's first bytes).
    static func chunks(in head: ArraySlice<UInt8>) -> [String: String] {
        let bytes = Array(head)
        guard bytes.starts(with: signature) else { return [:] }
        var text: [String: String] = [:]
        var at = 8
        while at + 8 <= bytes.count {
            let length = Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
            let type = String(decoding: bytes[(at + 4)..<(at + 8)], as: UTF8.self)
            guard length >= 0, at + 12 + length <= bytes.count, type != "IDAT" else { break }
            if type == "tEXt" {
                let body = bytes[(at + 8)..<(at + 8 + length)]
                if let zero = body.firstIndex(of: 0) {
                    text[String(decoding: body[..<zero], as: UTF8.self)] = String(decoding: body[(zero + 1)...], as: UTF8.self)
                }
            }
            at += 12 + length
        }
        return text
    }

    static func chunk(_ type: String, _ body: [UInt8]) -> [UInt8] {
        let typed = Array(type.utf8) + body
        return bigEndian(UInt32(body.count)) + typed + bigEndian(crc32(typed))
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    private static let crcTable: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for byte in bytes { c = crcTable[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }
}
