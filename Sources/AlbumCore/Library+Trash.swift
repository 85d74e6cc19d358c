/// The file manager's trash: each uid's `.Trash-UID` at the root.
/// SEMANTICS.md § Recently Deleted, and the file manager's trash.
extension Library {
    static let trashPrefix: Name = Array(".Trash-".utf8)

    /// The uid in a `.Trash-UID` name (decimal, no leading zeros).
    static func trashOwner(_ name: Name) -> UInt32? {
        guard name.starts(with: trashPrefix) else { return nil }
        let digits = name.dropFirst(trashPrefix.count)
        guard !digits.isEmpty, digits.count <= 10, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              digits.first != 0x30 || digits.count == 1 else { return nil }
        return UInt32(exactly: digits.reduce(UInt64(0)) { $0 * 10 + UInt64($1 - 0x30) })
    }

    /// `.Trash-UID`: offered only with a retention period; made on the first
    /// lookup by its own uid (never for another), owned by it, mode 0700.
    func trash(of uid: UInt32, lookedUpBy caller: Caller?) throws(LibraryError) -> Attributes {
        guard options.retention != nil else { throw .notFound }
        if let trash = try read({ db in try db.trash(of: uid)?.top }) {
            return try attributes(of: trash)
        }
        guard let caller, caller.uid == uid, !isReadOnly else { throw .notFound }
        let top = try mutate(by: caller, freesSpace: false) { m -> NodeID? in try m.ensureTrash(of: caller)?.top }.0
        guard let top else { throw .notFound }
        return try attributes(of: top)
    }

    /// Purges what has been in Recently Deleted longer than the retention
    /// period (all of it without one), in transactions of at most `batch`.
    /// Run at mount and periodically while mounted; returns what changed.
    /// (`time`: the store's time to judge by, for tests; the clock by default.)
    public func purgeExpired(batch: Int = 500) throws(LibraryError) -> ChangeSet {
        try purgeExpired(batch: batch, at: nil)
    }

    func purgeExpired(batch: Int = 500, at time: Nanoseconds?) throws(LibraryError) -> ChangeSet {
        var all = ChangeSet()
        while true {
            let (count, changes) = try mutate(by: Caller(uid: 0, gid: 0), at: time) { m in try m.purgeExpired(limit: batch) }
            all.merge(changes)
            if count < batch { return all }
        }
    }
}
