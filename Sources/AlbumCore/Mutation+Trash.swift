#if canImport(Glibc)
import Glibc
#endif
import SQLiteKit

/// A uid's `.Trash-UID` and its three directories (freedesktop.org Trash
/// specification, as GIO and KIO use it).
struct TrashDirectories {
    let top: NodeID
    let files: NodeID
    let info: NodeID
    let expunged: NodeID

    static let filesName: Name = Array("files".utf8)
    static let infoName: Name = Array("info".utf8)
    static let expungedName: Name = Array("expunged".utf8)
    static let infoSuffix: Name = Array(".trashinfo".utf8)
}

extension Mutation {
    // MARK: the trash directories

    /// The caller's trash, made on first use; nil when none is offered
    /// (no retention period: deletes are for good, and file managers must know).
    mutating func ensureTrash(of owner: Caller) throws -> TrashDirectories? {
        guard options.retention != nil else { return nil }
        if let trash = try db.trash(of: owner.uid) { return trash }
        // 0700: one user's trash is nobody else's business.
        let top = try db.insertNode(kind: .trash, parent: nil, mode: 0o700, owner: owner, now: now)
        var ids: [NodeID] = []
        for (kind, name) in [(NodeKind.trashFiles, TrashDirectories.filesName), (.trashInfo, TrashDirectories.infoName),
                             (.trashExpunged, TrashDirectories.expungedName)] {
            let id = try db.insertNode(kind: kind, parent: top, mode: 0o700, owner: owner, now: now)
            try db.insertEntry(top, name, id)
            ids.append(id)
        }
        let trash = TrashDirectories(top: top, files: ids[0], info: ids[1], expunged: ids[2])
        try db.insertTrash(uid: owner.uid, trash)
        return trash
    }

    /// The trash whose files/ is `files`.
    func trash(ofFiles files: NodeID) throws -> TrashDirectories {
        guard let trash = try db.trash(ofFiles: files) else { throw LibraryError.inconsistent("trash files/ \(files) has no trash") }
        return trash
    }

    /// A name free in both files/ and info/, chosen the way GIO chooses:
    /// `x.jpg`, `x.2.jpg`, `x.3.jpg`, … (the counter before the first dot).
    func freeTrashName(in trash: TrashDirectories, for name: Name) throws -> Name {
        var n = 1
        while true {
            let candidate = Self.trashName(name, n)
            if candidate.count + TrashDirectories.infoSuffix.count <= Names.maxLength,
               try db.child(of: trash.files, named: candidate) == nil,
               try db.child(of: trash.info, named: candidate + TrashDirectories.infoSuffix) == nil {
                return candidate
            }
            n += 1
        }
    }

    static func trashName(_ name: Name, _ n: Int) -> Name {
        guard n > 1 else { return Names.truncate(name, toAtMost: Names.maxLength - TrashDirectories.infoSuffix.count) }
        let counter = Array(".\(n)".utf8)
        let room = Names.maxLength - TrashDirectories.infoSuffix.count - counter.count
        if let dot = name.firstIndex(of: 0x2e) {
            let stem = Names.truncate(Array(name[..<dot]), toAtMost: max(0, room - (name.count - dot)))
            return Names.truncate(stem + counter + Array(name[dot...]), toAtMost: room + counter.count)
        }
        return Names.truncate(name, toAtMost: room) + counter
    }

    /// The `.trashinfo` of the assets albumfs put in a trash itself (an rm in
    /// the roll) are written when first needed, not by the delete: a lookup
    /// that misses in that trash's info/, a listing of it, a change in it.
    /// So a delete and a purge of an item nobody looked at make and remove no
    /// node (a quarter of their work). Returns whether `directory` is an info/
    /// that had any to write.
    mutating func writeUnwrittenTrashInfos(in directory: NodeID) throws -> Bool {
        guard let trash = try db.trash(withUnwrittenInfosIn: directory) else { return false }
        guard let top = try db.attributes(of: trash.top) else { throw LibraryError.inconsistent("trash \(trash.top) has no node") }
        for info in try db.unwrittenTrashInfos(of: trash.files) {
            try writeTrashInfo(in: trash, for: info.name, originalPath: info.originalPath, deletedAt: info.deletedAt,
                               owner: Caller(uid: top.uid, gid: top.gid))
            try db.trashInfoWritten(info.asset)
        }
        return true
    }

    /// Writes `info/NAME.trashinfo` for an item albumfs put in the trash
    /// itself, as GIO would have: the original path relative to the mount,
    /// URI-escaped, and the local deletion time.
    private mutating func writeTrashInfo(in trash: TrashDirectories, for name: Name, originalPath: Name,
                                         deletedAt: Nanoseconds, owner: Caller) throws {
        let text = Array("[Trash Info]\nPath=".utf8) + Self.uriEscaped(originalPath)
            + Array("\nDeletionDate=".utf8) + Array(ISO8601.local(deletedAt).utf8) + [0x0a]
        let infoName = name + TrashDirectories.infoSuffix
        if let old = try db.child(of: trash.info, named: infoName) { try removeSideFile(trash.info, infoName, old) }
        // Its data stays in the database until something opens it (GIO's
        // Trash window does): writing it creates no file.
        let id = try createSideFile(in: trash.info, named: infoName, mode: 0o600, owner: owner, contents: nil)
        try db.setSideFileData(id, text)
        try db.writeContentState(id, size: Int64(text.count), modified: deletedAt, changed: now)
    }

    /// g_uri_escape_string(path, "/", FALSE): unreserved bytes and `/` stay.
    static func uriEscaped(_ bytes: Name) -> Name {
        let hexDigits = Array("0123456789ABCDEF".utf8)
        var out: Name = []
        for byte in bytes {
            switch byte {
            case 0x41...0x5a, 0x61...0x7a, 0x30...0x39, 0x2d, 0x2e, 0x5f, 0x7e, 0x2f: out.append(byte)
            default: out += [0x25, hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0xf)]]
            }
        }
        return out
    }

    /// Removes `info/NAME.trashinfo` of the files/ entry `name`, if there is one.
    mutating func removeTrashInfo(of files: NodeID, _ name: Name) throws {
        let trash = try trash(ofFiles: files)
        let infoName = name + TrashDirectories.infoSuffix
        if let info = try db.child(of: trash.info, named: infoName) {
            try removeSideFile(trash.info, infoName, info)
        }
    }

    /// Whether files/`name` is the trash entry of deleted asset `child`
    /// (else it is a trashed album reference to it).
    func isDeletionItem(_ child: NodeID, _ files: NodeID, _ name: Name) throws -> Bool {
        guard let shown = try db.deletedAsset(child)?.trash else { return false }
        return shown.directory == files && shown.name == name
    }

    /// An item leaves files/ (restored, or expunged): its entry and its info go.
    mutating func leaveTrash(_ files: NodeID, _ name: Name) throws {
        try deleteEntry(files, name)
        try vanished(files, name)
        try removeTrashInfo(of: files, name)
    }

    // MARK: into the trash

    /// `rename(SOURCE, .Trash-UID/files/NAME)`: a roll entry deletes its asset
    /// (to Recently Deleted); an album entry moves there as a reference; an
    /// album moves there with everything in it put aside.
    mutating func putInTrash(_ child: NodeID, _ childKind: NodeKind, from parent: NodeID, _ parentKind: NodeKind,
                             _ name: Name, to files: NodeID, _ newName: Name) throws {
        if let existing = try db.child(of: files, named: newName) {
            try expunge(files, newName, existing, try kind(of: existing))
        }
        switch (childKind, parentKind) {
        case (.asset, .cameraRoll), (.asset, .hidden):
            try deleteAsset(child, except: parent, trashEntry: (files, newName))
        case (.asset, .album), (.sideFile, .cameraRoll), (.sideFile, .album), (.sideFile, .hidden):
            // A reference (or a side file) moves into the trash as it is.
            try moveEntry(parent, name, to: files, newName)
            try touched(parent)
            try touched(files)
            try db.touchChangeTime(child, now: now)
            changes.node(child)
        case (.album, _):
            try trashAlbum(child, from: parent, name, to: files, newName)
        default:
            throw LibraryError.notPermitted
        }
    }

    private mutating func trashAlbum(_ album: NodeID, from parent: NodeID, _ name: Name,
                                     to files: NodeID, _ newName: Name) throws {
        let subtree = try db.albumSubtree(album)
        for directory in subtree {
            for entry in try db.listingNames(directory) {
                // Cached names inside go stale; the assets lose a link.
                changes.entry(directory, entry.name)
                changes.node(entry.child)
            }
            changes.directory(directory)
        }
        try db.putEntriesAside(of: subtree, under: album)
        try moveEntry(parent, name, to: files, newName)
        try db.setParent(album, files)
        try db.setKind(album, .trashedAlbum)
        try db.touchChangeTime(album, now: now)
        try touched(parent)
        try touched(files)
    }

    // MARK: out of the trash

    /// `rename(.Trash-UID/files/NAME, DESTINATION)`: the item comes back.
    /// A deleted asset is restored (with its albums); a reference goes back
    /// into the album named (ENOENT while its asset is deleted); an album
    /// comes back with everything in it.
    mutating func restoreFromTrash(_ files: NodeID, _ name: Name, _ child: NodeID, to parent: NodeID,
                                   _ parentPolicy: DirectoryPolicy, _ newName: Name) throws {
        let childKind = try kind(of: child)
        if childKind == .trashedAlbum {
            guard parentPolicy.makesAlbums else { throw LibraryError.notPermitted }
            if let target = try db.child(of: parent, named: newName) {
                guard try kind(of: target) == .album else { throw LibraryError.notDirectory }
                guard try !db.hasEntries(target) else { throw LibraryError.notEmpty }
                try db.deleteNode(target)
            }
            try restoreAlbum(child, from: files, name, to: parent, newName)
            return
        }
        if childKind == .sideFile {
            guard parentPolicy.newFile == .asset else { throw LibraryError.notPermitted }
            if let target = try db.child(of: parent, named: newName) {
                guard try kind(of: target) == .sideFile else { throw LibraryError.exists }
                try removeSideFile(parent, newName, target)
            }
            try leaveTrash(files, name)
            try db.insertEntry(parent, newName, child)
            try touched(parent)
            return
        }
        guard childKind == .asset else { throw LibraryError.notPermitted }
        if try isDeletionItem(child, files, name) {
            switch parentPolicy.arrival {
            case .rollEntry: try restore(child, rollName: newName)
            case .hide:
                // Deleted from Hidden/: back into it (the trash's Restore).
                try restore(child, rollName: nil)
                try hide(child, from: (roll, []), as: newName, replacing: try db.child(of: parent, named: newName))
            case .albumEntry:
                try replaceReference(in: parent, named: newName)
                try restore(child, rollName: nil, album: (parent, newName))
            default: throw LibraryError.notPermitted
            }
            return
        }
        // A trashed reference.
        guard parentPolicy.arrival == .albumEntry else { throw LibraryError.notPermitted }
        // (Deleted or hidden meanwhile: not until it is back in the roll.)
        if try db.name(of: child, in: roll) == nil { throw LibraryError.notFound }
        if try db.name(of: child, in: parent) != nil { throw LibraryError.exists }
        try replaceReference(in: parent, named: newName)
        try leaveTrash(files, name)
        try db.insertEntry(parent, newName, child)
        try touched(parent)
        try db.touchChangeTime(child, now: now)
        changes.node(child)
    }

    /// A rename onto an album entry replaces it: that asset loses the reference.
    private mutating func restoreAlbum(_ album: NodeID, from files: NodeID, _ name: Name,
                                       to parent: NodeID, _ newName: Name) throws {
        for (directory, entryName, putAside) in try db.takeEntriesPutAside(under: album) {
            var child = putAside
            switch try db.kind(of: child) {
            case .asset?:
                if let edited = try db.editedAsset(withOriginal: child) {
                    // Edited meanwhile: the asset is the edited version now.
                    if try db.name(of: edited, in: directory) != nil { continue }
                    child = edited
                }
                if try db.name(of: child, in: roll) == nil {
                    // Deleted or hidden meanwhile: its restore or unhide brings it back here.
                    try db.remember(child, album: directory, name: entryName)
                    continue
                }
                changes.node(child)
            case nil: continue
            default: break
            }
            try db.insertEntry(directory, entryName, child)
            changes.directory(directory)
        }
        try db.setKind(album, .album)
        try db.setParent(album, parent)
        try moveEntry(files, name, to: parent, newName)
        try touched(files)
        try touched(parent)
        try removeTrashInfo(of: files, name)
        try db.touchChangeTime(album, now: now)
    }

    // MARK: Empty Trash

    /// An item leaves the trash for good (unlink or rmdir in files/, a move
    /// into expunged/): a deleted asset is purged, a reference forgotten, a
    /// trashed album forgotten with everything it put aside. No live asset is
    /// ever deleted by emptying a trash. (The caller has looked `name` up:
    /// `child` of `childKind`; a purge of many items does it once each.)
    mutating func expunge(_ files: NodeID, _ name: Name, _ child: NodeID, _ childKind: NodeKind) throws {
        switch childKind {
        case .asset:
            if try isDeletionItem(child, files, name) {
                try purge(child)
                return
            }
            try leaveTrash(files, name)
        case .sideFile:
            try removeSideFile(files, name, child)
            try removeTrashInfo(of: files, name)
        case .trashedAlbum:
            for (_, _, putAside) in try db.takeEntriesPutAside(under: child) where try db.kind(of: putAside) == .sideFile {
                // The album's side files go with it; its assets stay.
                try db.deleteNode(putAside)
                try db.schedulePurge(putAside)
                purged.append(putAside)
            }
            for album in try db.albumSubtree(child).reversed() { try db.deleteNode(album) }
            try touched(files)
            changes.entry(files, name)
            try removeTrashInfo(of: files, name)
        default:
            throw LibraryError.notPermitted
        }
    }

    // MARK: side files

    /// A file that belongs to `directory` only (never an asset): its node,
    /// its entry and (unless `contents` is nil: the caller keeps its data in
    /// the database) its empty content file, in the caller's transaction.
    mutating func createSideFile(in directory: NodeID, named name: Name, mode: UInt32, owner: Caller,
                                 contents: [UInt8]? = []) throws -> NodeID {
        let id = try db.insertNode(kind: .sideFile, parent: nil, mode: mode, owner: owner, now: now)
        try db.insertEntry(directory, name, id)
        if let contents { try createContent(id, contents: contents) }
        try touched(directory)
        return id
    }

    mutating func removeSideFile(_ directory: NodeID, _ name: Name, _ id: NodeID) throws {
        // One whose data is still in the database (the .trashinfo of an rm)
        // has no content file to free.
        if try !db.deleteNode(id) {
            try db.schedulePurge(id)
            purged.append(id)
        }
        try vanished(directory, name)
    }
}
