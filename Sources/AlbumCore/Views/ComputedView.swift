import SQLiteKit

/// A directory whose entries albumfs computes from what it knows of each
/// asset (SEMANTICS.md § the computed views): hard links under the assets'
/// roll names, never counted in `st_nlink`, served from indexed queries.
/// A new view is one more small type conforming to this (its SQL in
/// Queries+Facts.swift), listed in `ComputedViews.all`: its directory is
/// made in new stores and added to older ones at open (`Schema.addViewDirectories`),
/// lookups and listings find it, and the names it shows of an asset are
/// invalidated with the others. The policy of its directories is DirectoryPolicy's.
protocol ComputedView: Sendable {
    /// Its own directory, a node of the store.
    var directory: ViewDirectory { get }
    /// Whether it serves directory `id` (one of its fixed nodes or VirtualNodes).
    func serves(_ id: NodeID) -> Bool
    /// What `name` in `directory` shows, if anything.
    func lookup(_ db: Database, in directory: NodeID, _ name: Name) throws -> ViewChild?
    /// The entries of `directory` after `cookie`, in cookie order.
    func list(_ db: Database, _ directory: NodeID, after cookie: Int64, limit: Int) throws -> [ViewEntry]
    /// Whether a directory of this view that is not a node (a month, a set) shows anything now.
    func exists(_ db: Database, _ node: VirtualNode) throws -> Bool
    /// Every name under which it shows `asset` (roll name `rollName`; `place`:
    /// where its facts put it, nil if not read), with the names of the
    /// directories of its own that hold it: what the kernel may have cached.
    func names(of asset: NodeID, rollName: Name, place: ViewPlacement?, _ db: Database) throws -> [ChangeSet.EntryName]
}

/// A view's own directory: (id, kind, parent, name), a fixed node of the store.
struct ViewDirectory: Sendable {
    let id: NodeID
    let kind: NodeKind
    let parent: NodeID
    let name: Name

    init(_ id: NodeID, _ kind: NodeKind, in parent: NodeID, _ name: String) {
        (self.id, self.kind, self.parent, self.name) = (id, kind, parent, Array(name.utf8))
    }
}

enum ViewChild {
    case asset(Attributes)
    case directory(VirtualNode)
}

struct ViewEntry {
    let cookie: Int64
    let name: Name
    let child: ViewChild
}

extension ComputedView {
    /// Assets chosen by `source` (SQL with an `asset` column; `key` bound to ?1).
    func assets(_ db: Database, _ source: String, key: SQLValue? = nil, after cookie: Int64, limit: Int) throws -> [ViewEntry] {
        try db.viewListing(source, key: key, after: cookie, limit: limit)
            .map { ViewEntry(cookie: $0.cookie, name: $0.name, child: .asset($0.attributes)) }
    }

    func asset(_ db: Database, _ source: String, key: SQLValue? = nil, named name: Name) throws -> ViewChild? {
        try db.viewLookup(source, key: key, name: name).map { .asset($0) }
    }
}

/// Every computed view, and which serves a directory.
enum ComputedViews {
    /// The registration: a new view is one more line here.
    static let all: [any ComputedView] = [
        ByDateView(),
        SmartAlbumView.videos,
        SmartAlbumView.livePhotos,
        SmartAlbumView.screenshots,
        SmartAlbumView.raw,
        SmartAlbumView.favorites,
        DuplicatesView(),
        SmartAlbumView.edited,
        OriginalsView(),
    ]

    /// The directory the smart albums are in (an ordinary fixed directory).
    static let smartAlbums = ViewDirectory(FixedNode.smartAlbums, .smartAlbums, in: FixedNode.root, "Smart Albums")

    /// Every fixed directory of the views, Smart Albums first.
    static var directories: [ViewDirectory] { [smartAlbums] + all.map(\.directory) }

    private static let byDirectory: [NodeID: any ComputedView] = Dictionary(uniqueKeysWithValues: all.map { ($0.directory.id, $0) })

    /// The view whose entries directory `id` shows (nil: an ordinary directory).
    static func view(serving id: NodeID) -> (any ComputedView)? {
        if let view = byDirectory[id] { return view }
        guard VirtualNode(id) != nil else { return nil }
        return all.first { $0.serves(id) }
    }

    /// Every name under which the views show `asset` (roll name `rollName`),
    /// with the names of the month, year and duplicate set that hold it: what
    /// the kernel may have cached of it in the views.
    static func names(of asset: NodeID, rollName: Name, _ db: Database) throws -> [ChangeSet.EntryName] {
        let place = try db.viewPlacement(of: asset)
        return try all.flatMap { try $0.names(of: asset, rollName: rollName, place: place, db) }
    }

    /// A VirtualNode's attributes: a read-only directory owned like the root.
    static func attributes(of node: VirtualNode, root: Attributes) -> Attributes {
        var a = root
        a.id = node.id
        a.kind = .computedView
        a.mode = 0o555
        a.size = 0
        a.linkCount = 2
        return a
    }
}
