import AlbumCore
import Glibc

/// The one mapping from the library's errors to errno.
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
        case .missingData(let id):
            Log.error("asset \(id): its content file is missing from the store (albumfs fsck reports it; restore it from a backup)")
            return EIO
        case .io(let code): return code
        case .unusableStore(let reason):
            Log.error("store unusable: \(reason)")
            return EIO
        case .database(let code, let message):
            Log.error("database error \(code): \(message)")
            return EIO
        }
    }
}
