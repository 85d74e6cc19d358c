import SQLiteKit

/// A directory whose entries albumfs computes from what it knows of each
/// asset (SEMANTICS.md § the computed views): hard links under the assets'
/// roll names, never counted in `st_nlink`, served from indexed queries.
/// A new view is one more small type conforming to this, listed in
/// `ComputedViews.all`; the policy of its directories is DirectoryPolicy's.
protocol ComputedView: Sendable {
    /// Whether it serves directory `id` (one of its fixed nodes or VirtualNodes).
    func serves(_ id: NodeID) -> Bool
    /// What `name` in `directory` shows, if anything.
    func lookup(_ db: Database, in directory: NodeID, _ name: Name) throws -> ViewChild?
    /// The entries of `directory` after `cookie`, in cookie order.
    func list(_ db: Database, _ directory: NodeID, after cookie: Int64, limit: Int) throws -> [ViewEntry]
    /// Whether a directory of this view that is not a node (a month, a set) shows anything now.
    func exists(_ db: Database, _ node: VirtualNode) throws -> Bool
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
    static let all: [any ComputedView] = [ByDateView(), SmartAlbumView.videos, SmartAlbumView.livePhotos,
                                          SmartAlbumView.screenshots, SmartAlbumView.raw, SmartAlbumView.favorites,
                                          DuplicatesView()]

    /// The view whose entries directory `id` shows (nil: an ordinary directory).
    static func view(serving id: NodeID) -> (any ComputedView)? {
        guard (FixedNode.byDate...FixedNode.duplicates).contains(id) || VirtualNode(id) != nil else { return nil }
        return all.first { $0.serves(id) }
    }

    /// Every name under which the views show `asset` (roll name `rollName`),
    /// with the names of the month, year and duplicate set that hold it: what
    /// the kernel may have cached of it in the views. From its facts and its
    /// favorite flag; nothing when it has neither.
    static func names(of asset: NodeID, rollName: Name, _ db: Database) throws -> [ChangeSet.EntryName] {
        var names: [ChangeSet.EntryName] = []
        func add(_ directory: NodeID, _ name: Name) { names.append(ChangeSet.EntryName(directory: directory, name: name)) }
        if try db.isFavorite(asset) { add(FixedNode.favorites, rollName) }
        guard let place = try db.viewPlacement(of: asset),
              let monthNode = VirtualNode.month(named: Array(place.month.utf8)), case .month(let year, _) = monthNode else { return names }
        add(monthNode.id, rollName)
        add(VirtualNode.year(year).id, monthNode.name)
        add(FixedNode.byDate, VirtualNode.year(year).name)
        if place.kind == AssetFacts.Kind.video.rawValue { add(FixedNode.videos, rollName) }
        if place.screenshot { add(FixedNode.screenshots, rollName) }
        if place.raw { add(FixedNode.raw, rollName) }
        if place.pairable { add(FixedNode.livePhotos, rollName) }
        if let prefix = UInt64(place.sha256.prefix(12), radix: 16) {
            let set = VirtualNode.duplicateSet(prefix: prefix)
            add(set.id, rollName)
            add(FixedNode.duplicates, set.name)
        }
        return names
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
