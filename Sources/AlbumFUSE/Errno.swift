import AlbumCore
import Glibc

/// The one mapping from the library's errors to errno (pure: what is worth
/// a log line is `LibraryError.diagnostic`, logged where a reply is made).
extension LibraryError {
    var errno: Int32 {
        switch self {
        case .notFound: return ENOENT
        case .exists: return EEXIST
        case .notEmpty: return ENOTEMPTY
        case .notDirectory: return ENOTDIR
        case .isDirectory: return EISDIR
        case .notPermitted: return EPERM
        case .invalidArgument: return EINVAL
        case .nameTooLong: return ENAMETOOLONG
        case .readOnly: return EROFS
        case .noSpace: return ENOSPC
        case .noAttribute: return ENODATA
        case .attributeNotSupported: return EOPNOTSUPP
        case .rangeTooSmall: return ERANGE
        case .valueTooLarge: return E2BIG
        case .fileTooLarge: return EFBIG
        case .notSupported: return EOPNOTSUPP
        case .notOpenForWriting: return EBADF
        case .missingData, .inconsistent, .remote, .unavailable, .unusableStore, .database: return EIO
        case .io(let code): return code
        }
    }
}
