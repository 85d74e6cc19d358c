import SQLiteKit

/// Hiding and showing assets. SEMANTICS.md § Hidden.
///
/// A hidden asset has one entry, in `Hidden/`; its album memberships are
/// remembered (`remembered_entries`, as for a deleted asset) and come back
/// when it is shown again. It has no roll entry, so the views, duplicates
/// and dedupe, which all start from the roll, never see it.
extension Mutation {
    /// `mv ROLL-OR-ALBUM/x Hidden/NAME`: the asset leaves the roll and every
    /// album and shows in Hidden/ as `name` (a hidden asset of that name is
    /// deleted, a side file removed). `from`: the request's own entry.
    mutating func hide(_ asset: NodeID, from source: (directory: NodeID, name: Name), as name: Name, replacing target: NodeID?) throws {
        if let target {
            switch try kind(of: target) {
            case .asset: try deleteAsset(target, except: hidden)
            case .sideFile: try removeSideFile(hidden, name, target)
            default: throw LibraryError.isDirectory
            }
        }
        for (directory, entryName) in try db.entries(of: asset) {
            if directory != roll {
                guard try db.kind(of: directory) == .album else { continue }  // trashed references stay
                try db.remember(asset, album: directory, name: entryName)
            }
            try deleteEntry(directory, entryName)
            if directory == source.directory && entryName == source.name {
                try touched(directory)
            } else {
                try vanished(directory, entryName)
            }
        }
        try db.insertEntry(hidden, name, asset)
        try touched(hidden)
        try db.touchChangeTime(asset, now: now)
        changes.node(asset)
        // A pair hides together, its partner under its roll name (SEMANTICS.md § Pairs).
        if let partner = try db.partner(of: asset), let partnerName = try db.name(of: partner, in: roll) {
            try hide(partner, from: (roll, []), as: try db.freeName(in: hidden, for: partnerName), replacing: nil)
        }
    }

    /// `mv Hidden/x "Camera Roll/NAME"` or `mv Hidden/x Albums/A/NAME`: the
    /// asset shows again: in the roll (as `name`, or under its Hidden/ name
    /// with the (n) rule when it goes to an album), in that album, and in
    /// every remembered album that still exists.
    mutating func unhide(_ asset: NodeID, _ hiddenName: Name, to parent: NodeID, _ policy: DirectoryPolicy, _ name: Name) throws {
        let rollName: Name
        switch policy.arrival {
        case .rollEntry:
            if let replaced = try db.child(of: roll, named: name) {
                if try kind(of: replaced) == .sideFile {
                    try removeSideFile(roll, name, replaced)
                } else {
                    try deleteAsset(replaced, except: roll)
                }
            }
            rollName = name
        case .albumEntry:
            try replaceReference(in: parent, named: name)
            rollName = try db.freeName(in: roll, for: hiddenName)
        default:
            throw LibraryError.notPermitted
        }
        try deleteEntry(hidden, hiddenName)
        try touched(hidden)
        try db.insertEntry(roll, rollName, asset)
        try touched(roll)
        if parent != roll {
            try db.insertEntry(parent, name, asset)
            try touched(parent)
        }
        try bringBackRememberedAlbums(of: asset, except: parent)
        try db.touchChangeTime(asset, now: now)
        changes.node(asset)
        if let partner = try db.partner(of: asset), let partnerName = try db.name(of: partner, in: hidden) {
            try unhide(partner, partnerName, to: roll, DirectoryPolicy(.cameraRoll), try db.freeName(in: roll, for: partnerName))
            if parent != roll { try addPartner(partner, to: parent) }
        }
    }
}
