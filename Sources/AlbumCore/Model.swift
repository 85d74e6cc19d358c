#if canImport(Glibc)
import Glibc
#endif

/// A node's id: an asset's id, an album's or a fixed directory's. It is the
/// `st_ino` and the FUSE node id, stable across remounts and never reused.
public typealias NodeID = UInt64

/// What a node is. Stored as its raw value; never renumber.
public enum NodeKind: Int, Sendable {
    case root = 0
    case cameraRoll = 1
    case albumsRoot = 2
    case recentlyDeleted = 3
    case album = 4
    case asset = 5
    /// A uid's `.Trash-UID` (freedesktop.org trash), and its three directories.
    case trash = 6
    case trashFiles = 7
    case trashInfo = 8
    case trashExpunged = 9
    /// A file that belongs to its directory only and is never an asset (a
    /// trash's `.trashinfo` files).
    case sideFile = 10
    /// An album moved to a trash: its contents are put aside until it is
    /// restored or the trash is emptied.
    case trashedAlbum = 11
    /// `Smart Albums/`: holds the smart albums, nothing else.
    case smartAlbums = 12
    /// A directory computed from what albumfs knows of each asset (`By Date/`,
    /// its years and months, the smart albums but Favorites, the duplicate
    /// sets): read-only, its entries are the assets' roll names.
    case computedView = 13
    /// `Smart Albums/Favorites/`: computed too, but `ln` and `rm` there set
    /// and clear the favorite flag.
    case favorites = 14
    /// `Hidden/`: hidden assets, out of the roll and every album (SEMANTICS.md § Hidden).
    case hidden = 15
    /// `Smart Albums/Originals/`: computed, the first versions of the edited
    /// assets; a rename from it reverts, an unlink discards.
    case originals = 16

    public var isDirectory: Bool { self != .asset && self != .sideFile }
    /// Fixed directories are created with the store and can never be removed or renamed.
    public var isFixed: Bool {
        switch self {
        case .root, .cameraRoll, .albumsRoot, .recentlyDeleted, .trash, .trashFiles, .trashInfo, .trashExpunged,
             .smartAlbums, .computedView, .favorites, .hidden, .originals: return true
        default: return false
        }
    }
    /// Directories whose entries are computed (never cached by the kernel).
    public var isComputed: Bool { self == .computedView || self == .favorites || self == .originals }
    /// Nodes with a content file.
    public var hasData: Bool { self == .asset || self == .sideFile }
}

/// The fixed directories' ids and names.
public enum FixedNode {
    public static let root: NodeID = 1
    public static let cameraRoll: NodeID = 2
    public static let albumsRoot: NodeID = 3
    public static let recentlyDeleted: NodeID = 4
    public static let smartAlbums: NodeID = 5
    public static let byDate: NodeID = 6
    public static let favorites: NodeID = 7
    public static let videos: NodeID = 8
    public static let livePhotos: NodeID = 9
    public static let screenshots: NodeID = 10
    public static let raw: NodeID = 11
    public static let duplicates: NodeID = 12
    public static let edited: NodeID = 13
    public static let hidden: NodeID = 14
    public static let originals: NodeID = 15
    /// User nodes start above this, leaving room for fixed directories to come.
    static let lastReservedID: NodeID = 16

    public static let cameraRollName: Name = Array("Camera Roll".utf8)
    public static let albumsRootName: Name = Array("Albums".utf8)
    public static let recentlyDeletedName: Name = Array("Recently Deleted".utf8)
    public static let smartAlbumsName: Name = Array("Smart Albums".utf8)
    public static let byDateName: Name = Array("By Date".utf8)
    public static let hiddenName: Name = Array("Hidden".utf8)
}

/// Nanoseconds since the Unix epoch.
public typealias Nanoseconds = Int64

public struct Attributes: Sendable, Equatable {
    public var id: NodeID
    public var kind: NodeKind
    /// Permission bits only (07777); the file type follows from `kind`.
    public var mode: UInt32
    public var uid: UInt32
    public var gid: UInt32
    public var size: Int64
    public var linkCount: Int
    public var accessTime: Nanoseconds
    public var modificationTime: Nanoseconds
    public var changeTime: Nanoseconds
    /// The data is only in the bucket (evicted): `st_blocks` is 0, `st_size` the real size.
    public var isRemoteOnly = false
}

/// One entry of a directory listing with its node's attributes, so a
/// readdirplus needs no further query. `cookie` resumes the listing after it.
public struct DirectoryEntry: Sendable {
    public let name: Name
    public let attributes: Attributes
    public let cookie: Int64
}

/// What a caller asks setattr to change; nil fields stay as they are.
public struct AttributeChanges: Sendable {
    public var mode: UInt32?
    public var uid: UInt32?
    public var gid: UInt32?
    public var size: Int64?
    public var accessTime: TimeChange?
    public var modificationTime: TimeChange?
    /// A chown that names neither owner nor group (`chown(f, -1, -1)`): it
    /// changes no id, but takes set-ID bits as any chown does.
    public var chown = false
    /// Whether the change is a chown (an owner or group given, or neither).
    var isChown: Bool { chown || uid != nil || gid != nil }

    public enum TimeChange: Sendable, Equatable {
        case now
        case set(Nanoseconds)
    }

    public init(mode: UInt32? = nil, uid: UInt32? = nil, gid: UInt32? = nil, size: Int64? = nil,
                accessTime: TimeChange? = nil, modificationTime: TimeChange? = nil) {
        self.mode = mode; self.uid = uid; self.gid = gid; self.size = size
        self.accessTime = accessTime; self.modificationTime = modificationTime
    }
}

/// Who is asking, for the owner of what they create.
public struct Caller: Sendable {
    public let uid: UInt32
    public let gid: UInt32
    public init(uid: UInt32, gid: UInt32) { self.uid = uid; self.gid = gid }
}

/// What an operation changed beyond the entry the request named, so the FUSE
/// layer can tell the kernel to drop what it cached.
public struct ChangeSet: Sendable, Equatable {
    public struct EntryName: Sendable, Hashable {
        public let directory: NodeID
        public let name: Name
        public init(directory: NodeID, name: Name) {
            self.directory = directory
            self.name = name
        }
    }
    /// Names whose cached lookup is wrong now: names that vanished or now
    /// show another node. (Names that appear need none: "no such name" is
    /// never cached.) Each one costs the kernel a lock of its directory, so
    /// only these are listed.
    public private(set) var entries: [EntryName] = []
    /// Nodes whose cached attributes (link count, times) are wrong now.
    public private(set) var nodes: [NodeID] = []
    /// Directories whose cached listing is wrong now (their attributes too).
    public private(set) var directories: [NodeID] = []

    public init() {}

    mutating func entry(_ directory: NodeID, _ name: Name) {
        entries.append(EntryName(directory: directory, name: name))
    }
    private var seen = Set<NodeID>()
    private var seenDirectories = Set<NodeID>()

    mutating func node(_ id: NodeID) {
        if seen.insert(id).inserted { nodes.append(id) }
    }
    mutating func directory(_ id: NodeID) {
        if seenDirectories.insert(id).inserted { directories.append(id) }
    }
    /// The request's own entry: the kernel updates that one itself.
    mutating func dropEntry(_ directory: NodeID, _ name: Name) {
        entries.removeAll { $0.directory == directory && $0.name == name }
    }
    /// What the kernel refreshes itself after the request it sent: the
    /// attributes and listing of the directories it named, and the
    /// attributes of the node it unlinked or moved (see fuse_dir_changed and
    /// fuse_invalidate_attr in fs/fuse/dir.c).
    mutating func handledByKernel(directories handled: [NodeID], node: NodeID?) {
        for directory in handled where seenDirectories.remove(directory) != nil {
            directories.removeAll { $0 == directory }
        }
        if let node, seen.remove(node) != nil { nodes.removeAll { $0 == node } }
    }
    mutating func merge(_ other: ChangeSet) {
        entries += other.entries
        for id in other.nodes { node(id) }
        for id in other.directories { directory(id) }
    }
    public var isEmpty: Bool { entries.isEmpty && nodes.isEmpty && directories.isEmpty }
}

public struct FilesystemStatistics: Sendable {
    public var blockSize: UInt
    public var blocks: UInt64
    public var freeBlocks: UInt64
    public var availableBlocks: UInt64
    public var files: UInt64
    public var freeFiles: UInt64
}

public func currentTime() -> Nanoseconds {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}
