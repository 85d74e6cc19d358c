#if canImport(Glibc)
import Glibc
#endif

/// Runs a syscall wrapper that returns -1 on failure, retrying EINTR, and
/// throws the errno as a domain error.
@discardableResult
func syscall<T: FixedWidthInteger>(_ call: () -> T) throws(LibraryError) -> T {
    while true {
        let result = call()
        if result != -1 { return result }
        let code = errno
        if code == EINTR { continue }
        throw LibraryError(errno: code)
    }
}

extension LibraryError {
    /// The domain error for a system call's errno (the one place an errno
    /// becomes a LibraryError; `errno` in the FUSE adapter is the way back).
    public init(errno code: Int32) {
        switch code {
        case ENOSPC, EDQUOT: self = .noSpace
        case EROFS: self = .readOnly
        case ENOENT: self = .notFound
        case EEXIST: self = .exists
        case EFBIG: self = .fileTooLarge
        default: self = .io(code)
        }
    }
}
