/// `user.*` extended attributes, stored per node, plus read-only
/// `user.albumfs.*` ones computed from the model (readable, never listed).
extension Library {
    static let userPrefix: Name = Array("user.".utf8)
    static let reservedPrefix: Name = Array("user.albumfs.".utf8)
    static let idAttribute: Name = Array("user.albumfs.id".utf8)
    static let deletedAttribute: Name = Array("user.albumfs.deleted".utf8)
    static let purgeAttribute: Name = Array("user.albumfs.purge".utf8)
    /// The VFS's own limit (XATTR_SIZE_MAX).
    public static let maxAttributeValue = 65536

    public enum SetMode: Sendable { case createOrReplace, createOnly, replaceOnly }

    public func extendedAttribute(_ id: NodeID, _ name: Name) throws(LibraryError) -> [UInt8] {
        if name.starts(with: Self.reservedPrefix) {
            _ = try attributes(of: id)
            if name == Self.idAttribute { return Array(String(id).utf8) }
            if name == Self.deletedAttribute || name == Self.purgeAttribute {
                guard let deletedAt = try read({ db in try db.deletedAsset(id)?.deletedAt }) else { throw .noAttribute }
                let time = name == Self.deletedAttribute ? deletedAt : deletedAt + (options.retention ?? 0)
                return Array(ISO8601.utc(time).utf8)
            }
            throw .noAttribute
        }
        guard name.starts(with: Self.userPrefix) else { throw .attributeNotSupported }
        let value = try read { db -> [UInt8]?? in
            guard try db.kind(of: id) != nil else { return .none }
            return .some(try db.xattr(id, name))
        }
        guard let found = value else { throw .notFound }
        guard let found else { throw .noAttribute }
        return found
    }

    public func extendedAttributeNames(_ id: NodeID) throws(LibraryError) -> [Name] {
        let names = try read { db -> [Name]? in
            guard try db.kind(of: id) != nil else { return nil }
            return try db.xattrNames(id)
        }
        guard let names else { throw .notFound }
        return names
    }

    public func setExtendedAttribute(_ id: NodeID, _ name: Name, _ value: [UInt8], mode: SetMode) throws(LibraryError) {
        try checkWritableName(name)
        if value.count > Self.maxAttributeValue { throw .valueTooLarge }
        try write { db in
            guard try db.kind(of: id) != nil else { throw LibraryError.notFound }
            if try db.isDeleted(id) { throw LibraryError.notPermitted }
            let exists = try db.xattr(id, name) != nil
            if mode == .createOnly && exists { throw LibraryError.exists }
            if mode == .replaceOnly && !exists { throw LibraryError.noAttribute }
            try db.setXattr(id, name, value)
            try db.touchChangeTime(id, now: options.now())
        }
    }

    public func removeExtendedAttribute(_ id: NodeID, _ name: Name) throws(LibraryError) {
        try checkWritableName(name)
        try write { db in
            guard try db.kind(of: id) != nil else { throw LibraryError.notFound }
            if try db.isDeleted(id) { throw LibraryError.notPermitted }
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
