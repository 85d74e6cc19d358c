/// `user.*` extended attributes, stored per node, plus read-only
/// `user.albumfs.*` ones computed from the model (readable, never listed).
extension Library {
    static let userPrefix: Name = Array("user.".utf8)
    static let reservedPrefix: Name = Array("user.albumfs.".utf8)
    static let idAttribute: Name = Array("user.albumfs.id".utf8)
    /// The asset's identifier: the same through edits (SEMANTICS.md § The asset's identifier).
    static let assetAttribute: Name = Array("user.albumfs.asset".utf8)
    /// Set to `1` on either file of a pair: two assets again (SEMANTICS.md § Pairs).
    static let unpairAttribute: Name = Array("user.albumfs.unpair".utf8)
    static let deletedAttribute: Name = Array("user.albumfs.deleted".utf8)
    static let purgeAttribute: Name = Array("user.albumfs.purge".utf8)
    static let favoriteAttribute: Name = Array("user.albumfs.favorite".utf8)
    /// On the root: how many assets wait to be read, open writers included (0: every fact is computed).
    static let indexingAttribute: Name = Array("user.albumfs.indexing".utf8)
    /// On the root, with a remote: how many assets wait to be uploaded, open writers included.
    static let uploadingAttribute: Name = Array("user.albumfs.uploading".utf8)
    /// On the root, with a remote: `1` while the library has changes no
    /// snapshot in the bucket holds (SEMANTICS.md § Surviving the machine).
    static let snapshottingAttribute: Name = Array("user.albumfs.snapshotting".utf8)
    /// On the root, with a remote: how many thumbnails wait to be stored in
    /// the bucket beside their originals (SEMANTICS.md § Thumbnails).
    static let thumbnailingAttribute: Name = Array("user.albumfs.thumbnailing".utf8)
    /// On a second device's root: read, it takes the bucket's newest
    /// snapshot (`albumfs refresh`) and says `unchanged: …`, `refreshed: …`
    /// or `failed: …` (SEMANTICS.md § Surviving the machine).
    static let refreshAttribute: Name = Array("user.albumfs.refresh".utf8)
    /// On an asset, with a remote: `local`, `uploading`, `both`, `remote` or `downloading` (SEMANTICS.md § Remote storage).
    static let storageAttribute: Name = Array("user.albumfs.storage".utf8)
    /// On an asset coming from the bucket now: `BYTES/TOTAL` checked so far.
    static let progressAttribute: Name = Array("user.albumfs.progress".utf8)
    /// On an asset, with a remote: `1` pins it local (never evicted), `0` not. Writable.
    static let keepAttribute: Name = Array("user.albumfs.keep".utf8)
    /// Set on a duplicate set's directory: merges the set (Library.mergeDuplicates);
    /// read: the roll names a merge would take now, the kept one first (Library.mergePlan).
    public static let mergeAttribute: Name = Array("user.albumfs.merge".utf8)

    /// The `user.albumfs.*` attributes read from an asset's facts.
    enum FactAttribute: String {
        case sha256, type, kind, captured, width, height, duration, location

        func value(in f: AssetFacts) -> String? {
            switch self {
            case .sha256: return f.sha256
            case .type: return f.type
            case .kind: return f.kind.rawValue
            case .captured: return f.captured
            case .width: return f.width.map(String.init)
            case .height: return f.height.map(String.init)
            case .duration: return f.duration.map { Self.seconds($0) }
            case .location: return f.location
            }
        }

        /// Seconds with up to three decimals, no trailing zeros (`12.5`, `3`).
        static func seconds(_ value: Double) -> String {
            let thousandths = Int64((value * 1000).rounded())
            let whole = thousandths / 1000, fraction = thousandths % 1000
            guard fraction != 0 else { return String(whole) }
            var digits = String(fraction)
            digits = String(repeating: "0", count: 3 - digits.count) + digits
            while digits.hasSuffix("0") { digits.removeLast() }
            return "\(whole).\(digits)"
        }
    }
    /// The VFS's own limit (XATTR_SIZE_MAX).
    public static let maxAttributeValue = 65536

    public enum SetMode: Sendable { case createOrReplace, createOnly, replaceOnly }

    public func extendedAttribute(_ id: NodeID, _ name: Name) throws(LibraryError) -> [UInt8] {
        if name.starts(with: Self.reservedPrefix) {
            _ = try attributes(of: id)
            if name == Self.idAttribute { return Array(String(id).utf8) }
            if name == Self.assetAttribute {
                guard try read({ db in try db.kind(of: id) }) == .asset else { throw .noAttribute }
                return Array(String(try read { db in try db.assetIdentifier(of: id) }).utf8)
            }
            if name == Self.deletedAttribute || name == Self.purgeAttribute {
                guard let deletedAt = try read({ db in try db.deletedAsset(id)?.deletedAt }) else { throw .noAttribute }
                let time = name == Self.deletedAttribute ? deletedAt : deletedAt + (options.retention ?? 0)
                return Array(ISO8601.utc(time).utf8)
            }
            if name == Self.mergeAttribute {
                guard case .duplicateSet = VirtualNode(id) else { throw .noAttribute }
                return try mergePlan(shownIn: id)
            }
            if id == FixedNode.root, name == Self.uploadingAttribute, remote != nil {
                // As for indexing: a file still open for writing is uploaded after its last close.
                let waiting = try uploadsQueued() + Int64(openFiles.filesOpenForWriting)
                // Someone waits for them (sync --wait reads this): no settling first.
                if waiting > 0 { remoteSync.withLock { $0 }?.hurry() }
                return Array(String(waiting).utf8)
            }
            if id == FixedNode.root, name == Self.snapshottingAttribute, remote != nil, !isReadOnly {
                // Someone waits for a snapshot (sync --wait reads this): one is due now.
                let pending = snapshotPending
                if pending { hurrySnapshot() }
                return Array((pending ? "1" : "0").utf8)
            }
            if id == FixedNode.root, name == Self.thumbnailingAttribute, remote != nil, !isReadOnly {
                let waiting = try read { db in try db.thumbnailsToStoreCount() }
                if waiting > 0 { remoteSync.withLock { $0 }?.wake() }
                return Array(String(waiting).utf8)
            }
            if id == FixedNode.root, name == Self.refreshAttribute, remote != nil {
                do {
                    return Array(try refreshMirror().description.utf8)
                } catch .notSupported {
                    throw .noAttribute   // not a second device's mount
                } catch {
                    let why = error.diagnostic ?? "\(error)"
                    options.log("refresh: \(why)")
                    return Array("failed: \(why)".utf8)
                }
            }
            if name == Self.keepAttribute, remote != nil {
                return Array((try isKeptLocal(id) ? "1" : "0").utf8)
            }
            if name == Self.storageAttribute {
                guard let storage = try storage(of: id) else { throw .noAttribute }
                return Array(storage.utf8)
            }
            if name == Self.progressAttribute {
                guard let progress = downloads.withLock({ $0[id] })?.progress else { throw .noAttribute }
                return Array("\(progress.landed)/\(progress.total)".utf8)
            }
            if name == Self.favoriteAttribute {
                guard try read({ db in try db.isFavorite(id) }) else { throw .noAttribute }
                return Array("1".utf8)
            }
            if id == FixedNode.root, name == Self.indexingAttribute {
                // A file still open for writing will be read after its last
                // close (whose release may reach the daemon after close()
                // returned): it counts as waiting.
                let waiting = indexer.map { $0.pending + openFiles.filesOpenForWriting } ?? 0
                return Array(String(waiting).utf8)
            }
            guard let fact = FactAttribute(rawValue: String(decoding: name.dropFirst(Self.reservedPrefix.count), as: UTF8.self)),
                  let facts = try read({ db in try db.facts(of: id) }),
                  let value = fact.value(in: facts) else { throw .noAttribute }
            return Array(value.utf8)
        }
        guard name.starts(with: Self.userPrefix) else { throw .attributeNotSupported }
        // A view's year, month or set has no attributes of its own.
        if try isVirtualDirectory(id) { throw .noAttribute }
        let value = try read { db -> [UInt8]?? in
            guard try db.kind(of: id) != nil else { return .none }
            return .some(try db.xattr(id, name))
        }
        guard let found = value else { throw .notFound }
        guard let found else { throw .noAttribute }
        return found
    }

    public func extendedAttributeNames(_ id: NodeID) throws(LibraryError) -> [Name] {
        if try isVirtualDirectory(id) { return [] }
        let names = try read { db -> [Name]? in
            guard try db.kind(of: id) != nil else { return nil }
            return try db.xattrNames(id)
        }
        guard let names else { throw .notFound }
        return names
    }

    public func setExtendedAttribute(_ id: NodeID, _ name: Name, _ value: [UInt8], mode: SetMode) throws(LibraryError) {
        if name == Self.unpairAttribute {
            guard value == Array("1".utf8) else { throw .invalidArgument }
            return try unpair(id)
        }
        if name == Self.keepAttribute, remote != nil {
            guard value == Array("1".utf8) || value == Array("0".utf8) else { throw .invalidArgument }
            return try setKeptLocal(id, value == Array("1".utf8))
        }
        try checkWritableName(name)
        if value.count > Self.maxAttributeValue { throw .valueTooLarge }
        if try isVirtualDirectory(id) { throw .notPermitted }
        try write { db in
            guard try db.kind(of: id) != nil else { throw LibraryError.notFound }
            if try db.isUnchangeable(id) { throw LibraryError.notPermitted }
            let exists = try db.xattr(id, name) != nil
            if mode == .createOnly && exists { throw LibraryError.exists }
            if mode == .replaceOnly && !exists { throw LibraryError.noAttribute }
            try db.setXattr(id, name, value)
            try db.touchChangeTime(id, now: options.now())
        }
    }

    public func removeExtendedAttribute(_ id: NodeID, _ name: Name) throws(LibraryError) {
        try checkWritableName(name)
        if try isVirtualDirectory(id) { throw .notPermitted }
        try write { db in
            guard try db.kind(of: id) != nil else { throw LibraryError.notFound }
            if try db.isUnchangeable(id) { throw LibraryError.notPermitted }
            guard try db.xattr(id, name) != nil else { throw LibraryError.noAttribute }
            try db.removeXattr(id, name)
            try db.touchChangeTime(id, now: options.now())
        }
    }

    private func checkWritableName(_ name: Name) throws(LibraryError) {
        if name.starts(with: Self.reservedPrefix) { throw .notPermitted }
        guard name.starts(with: Self.userPrefix), name.count > Self.userPrefix.count else { throw .attributeNotSupported }
        if name.count > 255 { throw .nameTooLong }
    }
}
