/// What a kind of directory means: what a file or directory made in it
/// becomes, what unlinking one of its entries does, and what an entry moved
/// into it by rename becomes. The library asks the policy of the directory
/// a request names before it changes anything, so every operation treats a
/// kind the same way, and a new kind of directory (a computed view) is one
/// more policy here, not one more case in every operation.
struct DirectoryPolicy: Sendable {
    enum NewFile: Sendable { case asset, sideFile, refused }

    enum Removal: Sendable {
        /// The roll: the asset is deleted from the roll and every album (to Recently Deleted).
        case deleteAsset
        /// An album: only that reference goes.
        case dropReference
        /// Recently Deleted: the asset is purged for good.
        case purge
        /// A trash's files/: the item leaves the trash for good (Empty Trash).
        case expunge
        /// Favorites: the asset's favorite flag is cleared.
        case unfavorite
        /// Originals: the original is discarded for good; the asset stays, no longer edited.
        case discardOriginal
        case refused
    }

    enum Arrival: Sendable {
        /// The roll: a rename into it renames, restores or replaces a roll entry.
        case rollEntry
        /// An album: adds (or moves, or restores) a reference.
        case albumEntry
        /// `Albums/`: albums only.
        case albumsOnly
        /// A trash's files/: the entry is put in the trash.
        case trashItem
        /// A trash's expunged/: whatever arrives is expunged at once.
        case expunge
        /// Side files may be renamed within the directory; nothing arrives from elsewhere.
        case withinOnly
        /// Favorites: `ln` sets the asset's favorite flag (nothing else arrives).
        case favorite
        /// `Hidden/`: a rename into it hides the asset (out of the roll and every album).
        case hide
        case refused
    }

    let newFile: NewFile
    /// Whether `mkdir` makes an album here.
    let makesAlbums: Bool
    let removal: Removal
    let arrival: Arrival
    /// Whether `rmdir` may remove a directory here (an album, or a trashed album in files/).
    let removesDirectories: Bool

    init(_ kind: NodeKind) {
        switch kind {
        case .cameraRoll:
            self.init(newFile: .asset, makesAlbums: false, removal: .deleteAsset, arrival: .rollEntry)
        case .album:
            self.init(newFile: .asset, makesAlbums: true, removal: .dropReference, arrival: .albumEntry, removesDirectories: true)
        case .albumsRoot:
            self.init(newFile: .refused, makesAlbums: true, removal: .refused, arrival: .albumsOnly, removesDirectories: true)
        case .recentlyDeleted:
            self.init(newFile: .refused, makesAlbums: false, removal: .purge, arrival: .refused)
        case .trashFiles:
            self.init(newFile: .refused, makesAlbums: false, removal: .expunge, arrival: .trashItem, removesDirectories: true)
        case .trashExpunged:
            self.init(newFile: .refused, makesAlbums: false, removal: .refused, arrival: .expunge)
        case .trashInfo:
            self.init(newFile: .sideFile, makesAlbums: false, removal: .refused, arrival: .withinOnly)
        case .favorites:
            self.init(newFile: .refused, makesAlbums: false, removal: .unfavorite, arrival: .favorite)
        case .hidden:
            self.init(newFile: .asset, makesAlbums: false, removal: .deleteAsset, arrival: .hide)
        case .originals:
            self.init(newFile: .refused, makesAlbums: false, removal: .discardOriginal, arrival: .refused)
        case .root, .trash, .trashedAlbum, .asset, .sideFile, .smartAlbums, .computedView:
            self.init(newFile: .refused, makesAlbums: false, removal: .refused, arrival: .refused)
        }
    }

    private init(newFile: NewFile, makesAlbums: Bool, removal: Removal, arrival: Arrival, removesDirectories: Bool = false) {
        self.newFile = newFile
        self.makesAlbums = makesAlbums
        self.removal = removal
        self.arrival = arrival
        self.removesDirectories = removesDirectories
    }
}
