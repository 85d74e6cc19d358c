/// Sorts `-o` options the way sshfs and mergerfs do: fstab noise is ignored,
/// options libfuse knows are passed on, and anything else is an error, with
/// every unknown option reported at once.
struct MountOptions {
    var readOnly = false
    /// `nopassthrough`: serve every read and write through the daemon, even
    /// where the kernel could serve them from the content files itself.
    var passthrough = true
    /// `uring`: take requests through io_uring where the kernel offers FUSE
    /// over io_uring (Linux 6.14+ with the fuse module's `enable_uring` on);
    /// `nouring` (the default): through /dev/fuse.
    var ring = false
    /// `trash_days=N`: days deleted assets stay in Recently Deleted (0: none).
    var trashDays = 30
    /// `cache_size=SIZE` (bytes, or with K, M, G, T: powers of 1024): with a
    /// remote, the most bytes of originals kept locally (nil: all of them).
    var cacheSize: Int64?
    /// `remote_timeout=SECONDS`: how long a read of data only in the bucket
    /// waits with nothing coming before it fails with EIO.
    var remoteTimeout: Double = 10
    /// `lease_time=SECONDS`: how long the lease on the bucket lasts unless
    /// renewed (every third of it); `take_over`: take it from another store
    /// whose machine is gone (SEMANTICS.md § Surviving the machine).
    var leaseTime = 60
    var takeOver = false
    /// `nothumbnails`: put no thumbnails in the mounting user's thumbnail
    /// cache (SEMANTICS.md § Thumbnails).
    var thumbnails = true
    /// `thumbnail_space=SIZE`: the most bytes of thumbnails a mount writes
    /// into that cache (nil: FileManagerThumbnails.Limits' 1 GiB).
    var thumbnailSpace: Int64?
    /// What goes to libfuse's `-o`.
    var fuseOptions: [String] = []

    /// Mount flags libfuse 3.14 passes to mount(2) itself. (Every mount is
    /// nosuid,nodev: `suid` and `dev` are accepted and ignored.)
    static let passedToFUSE: Set<String> = [
        "rw", "ro", "exec", "noexec",
        "async", "sync", "dirsync", "noatime", "allow_other", "allow_root", "auto_unmount",
    ]
    /// Accepted and ignored: generic options that libfuse does not know
    /// (albumfs never updates atime on read), and fstab's own words.
    static let ignored: Set<String> = [
        "atime", "relatime", "norelatime", "strictatime", "nostrictatime", "diratime", "nodiratime",
        "lazytime", "nolazytime", "default_permissions", "suid", "nosuid", "dev", "nodev",
        "defaults", "auto", "noauto", "user", "users", "nouser", "owner", "nofail", "_netdev",
    ]
    /// Ignored when followed by `=value`.
    static let ignoredPrefixes = ["x-", "comment=", "fsname=", "subtype="]

    init(_ lists: [String]) throws(CommandFailure) {
        var unknown: [String] = []
        for option in lists.flatMap({ $0.split(separator: ",").map(String.init) }) where !option.isEmpty {
            if Self.passedToFUSE.contains(option) {
                fuseOptions.append(option)
                if option == "ro" { readOnly = true }
                if option == "rw" { readOnly = false }
            } else if option == "nopassthrough" || option == "passthrough" {
                passthrough = option == "passthrough"
            } else if option == "nouring" || option == "uring" {
                ring = option == "uring"
            } else if option == "nothumbnails" || option == "thumbnails" {
                thumbnails = option == "thumbnails"
            } else if option.hasPrefix("trash_days=") {
                guard let days = Int(option.dropFirst("trash_days=".count)), days >= 0, days <= 36_500 else {
                    throw CommandFailure(.usage, "trash_days takes a number of days from 0 to 36500: \(option)")
                }
                trashDays = days
            } else if option.hasPrefix("cache_size=") {
                cacheSize = try Self.size(of: option)
            } else if option.hasPrefix("thumbnail_space=") {
                thumbnailSpace = try Self.size(of: option)
            } else if option == "take_over" {
                takeOver = true
            } else if option.hasPrefix("lease_time=") {
                guard let seconds = Int(option.dropFirst("lease_time=".count)), seconds >= 3, seconds <= 3600 else {
                    throw CommandFailure(.usage, "lease_time takes seconds, from 3 to 3600: \(option)")
                }
                leaseTime = seconds
            } else if option.hasPrefix("remote_timeout=") {
                guard let seconds = Double(option.dropFirst("remote_timeout=".count)), seconds >= 1, seconds <= 3600 else {
                    throw CommandFailure(.usage, "remote_timeout takes seconds, from 1 to 3600: \(option)")
                }
                remoteTimeout = seconds
            } else if option.hasPrefix("max_read=") {
                fuseOptions.append(option)
            } else if Self.ignored.contains(option) || Self.ignoredPrefixes.contains(where: option.hasPrefix) {
                continue
            } else {
                unknown.append(option)
            }
        }
        if !unknown.isEmpty {
            throw CommandFailure(.usage, "unknown mount option\(unknown.count > 1 ? "s" : ""): \(unknown.joined(separator: ", "))")
        }
    }

    /// `20G`, `512M`, `4096`: bytes (K, M, G, T are powers of 1024).
    /// The size of `name=SIZE`, or a usage error naming the option.
    static func size(of option: String) throws(CommandFailure) -> Int64 {
        let name = option.prefix { $0 != "=" }
        guard let bytes = size(option.dropFirst(name.count + 1)) else {
            throw CommandFailure(.usage, "\(name) takes a size (bytes, or with K, M, G or T): \(option)")
        }
        return bytes
    }

    static func size(_ text: Substring) -> Int64? {
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        var digits = text
        var unit: Int64 = 1
        if let last = text.last?.uppercased().first, let factor = units[last] { unit = factor; digits = text.dropLast() }
        guard let number = Int64(digits), number >= 0 else { return nil }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: unit)
        return overflow ? nil : bytes
    }
}
