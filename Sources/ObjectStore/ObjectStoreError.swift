/// Every way a request to the object store can fail, as a caller must tell
/// them apart: try again later (unreachable, a server error), fix the
/// configuration (denied), or act on the answer (not found, precondition).
public enum ObjectStoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No answer: refused, timed out, stalled, a name that does not resolve.
    case unreachable(String)
    /// 403: wrong keys, a clock far off, no permission.
    case denied(String)
    /// 404: no such key (or bucket).
    case notFound(String)
    /// 412: a conditional request lost (the object exists, or changed).
    case preconditionFailed
    /// Any other answer that is not a success.
    case server(status: Int, code: String, message: String)
    /// An answer that does not say what it must (a listing that is not XML, …).
    case corrupt(String)
    /// The local half failed: reading the file to upload, writing what came.
    case local(String)

    public var description: String {
        switch self {
        case .unreachable(let why): return "the object store is unreachable: \(why)"
        case .denied(let why): return "the object store refused the request (check the keys and the clock): \(why)"
        case .notFound(let what): return "not in the object store: \(what)"
        case .preconditionFailed: return "the object store refused a conditional request (the object exists or changed)"
        case .server(let status, let code, let message): return "the object store answered \(status) \(code): \(message)"
        case .corrupt(let what): return "the object store answered nonsense: \(what)"
        case .local(let what): return what
        }
    }
}
