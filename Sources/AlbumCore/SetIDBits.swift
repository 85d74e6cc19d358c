#if canImport(Glibc)
import Glibc
#endif

/// Which set-user-ID and set-group-ID bits a change takes from a file, as
/// Linux decides it for every filesystem (`fs/attr.c`):
///
/// - a write or a truncate by a caller without CAP_FSETID
///   (`setattr_should_drop_suidgid`): the set-user-ID bit, and the
///   set-group-ID bit where `droppedSetGroupID` says so;
/// - a chown (`chown_common`), by anyone, root included: the set-user-ID bit
///   always, the set-group-ID bit where `droppedSetGroupID` says so.
///
/// `setattr_should_drop_sgid`: the set-group-ID bit goes when the file is
/// group-executable, or when the caller is neither in the file's group nor
/// capable. Root stands for CAP_FSETID here, and a caller's group is its
/// primary group (the daemon is told no supplementary groups).
/// Directories keep their bits (set-group-ID on a directory means inherit).
public enum SetIDBits {
    static let setUserID: UInt32 = 0o4000
    static let setGroupID: UInt32 = 0o2000
    static let groupExecute: UInt32 = 0o0010

    /// The bits a write or truncate by `caller` clears.
    public static func droppedByWriting(_ a: Attributes, by caller: Caller) -> UInt32 {
        guard a.kind == .asset, !caller.isSuperuser else { return 0 }
        return (a.mode & setUserID) | droppedSetGroupID(a, by: caller)
    }

    /// The bits a chown by `caller` clears.
    public static func droppedByChown(_ a: Attributes, by caller: Caller) -> UInt32 {
        guard a.kind == .asset else { return 0 }
        return (a.mode & setUserID) | droppedSetGroupID(a, by: caller)
    }

    private static func droppedSetGroupID(_ a: Attributes, by caller: Caller) -> UInt32 {
        guard a.mode & setGroupID != 0 else { return 0 }
        if a.mode & groupExecute != 0 { return setGroupID }
        return caller.isSuperuser || caller.gid == a.gid ? 0 : setGroupID
    }
}

extension Caller {
    /// Root: the caller the kernel gives CAP_FSETID.
    public var isSuperuser: Bool { uid == 0 }
}
