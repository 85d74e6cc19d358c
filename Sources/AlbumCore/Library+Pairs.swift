/// Pairs on purpose: SEMANTICS.md § Pairs.
extension Library {
    /// Splits the pair `member` is in: two assets, each in the albums the
    /// pair was in. Not in a pair: EINVAL.
    public func unpair(_ member: NodeID) throws(LibraryError) {
        _ = try mutate(by: Caller(uid: 0, gid: 0), freesSpace: false) { m in
            guard try m.db.kind(of: member) == .asset else { throw LibraryError.notPermitted }
            guard try m.db.partner(of: member) != nil else { throw LibraryError.invalidArgument }
            try m.unpair(member)
        }
    }
}
