import SQLiteKit

/// Every way a library operation can fail. The FUSE adapter maps these to errno
/// in exactly one place; the commands turn them into one-line messages.
public enum LibraryError: Error, Equatable, Sendable {
    case notFound
    case exists
    case notEmpty
    case notDirectory
    case isDirectory
    /// The operation makes no sense for this node (EPERM): a fixed directory, a
    /// file in `Albums/`, a symlink…
    case notPermitted
    case invalidArgument
    case nameTooLong
    case readOnly
    case noSpace
    case noAttribute
    case attributeNotSupported
    case rangeTooSmall
    case valueTooLarge
    /// A size past the largest file the content store's filesystem holds (EFBIG).
    case fileTooLarge
    /// The operation is not one albumfs does (EOPNOTSUPP), e.g. a fallocate mode.
    case notSupported
    /// A handle that was not opened for writing asked to change data (EBADF).
    case notOpenForWriting
    /// A listed asset whose content file is gone (EIO, logged: the name exists).
    case missingData(NodeID)
    /// The database disagrees with itself (a row a committed change needs is
    /// gone): EIO, logged; `albumfs fsck` looks into it.
    case inconsistent(String)
    /// Data only in the bucket could not be had (unreachable, refused, a
    /// wrong object): EIO, logged with the asset and the reason.
    case remote(String)
    /// Data only in the bucket whose download failed (EIO): the download
    /// logged why, once, so the reads it fails do not again.
    case unavailable(String)
    /// The store cannot be used: the text says why, in one line.
    case unusableStore(String)
    /// A system call on the store failed with this errno (one the domain has no case for).
    case io(Int32)
    case database(code: Int32, message: String)

    /// Turns a SQLite failure into the domain error it means.
    public init(_ error: SQLiteError) {
        if error.isDiskFull { self = .noSpace }
        else if error.isReadOnly { self = .readOnly }
        else { self = .database(code: error.code, message: error.message) }
    }
}

/// Runs a store operation and gives every thrown error the domain type.
@inline(__always)
func mappingErrors<T>(_ body: () throws -> T) throws(LibraryError) -> T {
    do {
        return try body()
    } catch let error as LibraryError {
        throw error
    } catch let error as SQLiteError {
        throw LibraryError(error)
    } catch {
        throw LibraryError.inconsistent("unexpected error: \(error)")
    }
}

extension LibraryError {
    /// What a failure that means damage or a bug says in the log (nil: an
    /// ordinary answer, like ENOENT). Written once, where errors become
    /// replies; the mapping to errno is `errno`, in the FUSE adapter.
    public var diagnostic: String? {
        switch self {
        case .missingData(let id):
            return "asset \(id): its content file is missing from the store (albumfs fsck reports it; restore it from a backup)"
        case .inconsistent(let what): return "the store's database is inconsistent: \(what) (run albumfs fsck)"
        case .remote(let what): return what
        case .unusableStore(let reason): return "store unusable: \(reason)"
        case .database(let code, let message): return "database error \(code): \(message)"
        default: return nil
        }
    }
}
