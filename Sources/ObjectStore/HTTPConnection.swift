#if canImport(Glibc)
import Glibc
#endif
import CCurl

/// How long a request waits: for its connection, and with no byte coming
/// (then it is given up as unreachable).
public struct RequestTimeouts: Sendable, Equatable {
    public var connect: Double
    public var stall: Double

    public init(connect: Double = 10, stall: Double = 30) { (self.connect, self.stall) = (connect, stall) }

    /// A reader's: both within `seconds` (`-o remote_timeout`).
    public static func within(_ seconds: Double) -> RequestTimeouts {
        RequestTimeouts(connect: min(10, seconds), stall: max(1, seconds))
    }
}

/// One HTTP connection to an object store through libcurl's easy interface
/// (kept alive between requests). Not shared between threads: each user of
/// the store has its own.
final class HTTPConnection {
    enum Body {
        case none
        case bytes([UInt8])
        /// `length` bytes of the file open at `descriptor`, from `offset` (read with pread).
        case file(descriptor: Int32, offset: Int64, length: Int64)
    }

    enum Sink {
        case memory
        /// A success's body written with pwrite to the file open at
        /// `descriptor`, from `offset` on, at most `limit` bytes (more is an
        /// error: nothing past them is touched), each piece then shown to
        /// `observer`, whose false stops the transfer. The body of a response
        /// that is not a success is kept in memory, for its error, and never
        /// reaches the file; after any error what reached the file is not to
        /// be trusted.
        case file(descriptor: Int32, offset: Int64, limit: Int64, observer: (UnsafeRawBufferPointer) -> Bool)
    }

    struct Response {
        let status: Int
        /// Header names in lower case.
        let headers: [String: String]
        /// The body, when the sink was memory.
        let body: [UInt8]
        /// Bytes of body received.
        let received: Int64
    }

    private let handle: UnsafeMutableRawPointer
    private let timeouts: RequestTimeouts
    /// The socket of the connection curl holds, as it made it (`albumfs_curl_track_socket`).
    private let socket = UnsafeMutablePointer<curl_socket_t>.allocate(capacity: 1)
    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    init(timeouts: RequestTimeouts) throws(ObjectStoreError) {
        guard Self.initialized, let handle = curl_easy_init() else { throw .unreachable("libcurl cannot start") }
        self.handle = handle
        self.timeouts = timeouts
        socket.initialize(to: CURL_SOCKET_BAD)
    }

    deinit {
        curl_easy_cleanup(handle)
        socket.deallocate()
    }

    /// libcurl's receive buffer for bodies written to a file: its largest
    /// (CURL_MAX_READ_SIZE), so that a recv, a pwrite and a look by the
    /// observer move up to 512 KiB, not the default 16 KiB (a cold read of a
    /// remote-only 512 MiB original: the daemon's CPU 1.05–2.0 s with the
    /// default, 0.9–1.1 s with this).
    static let fileBufferSize = 512 * 1024

    /// Sends one request and waits for its whole response.
    func perform(method: String, url: String, headers: [(name: String, value: String)], body: Body,
                 into sink: Sink = .memory) throws(ObjectStoreError) -> Response {
        curl_easy_reset(handle)
        let transfer = Transfer(body: body, sink: sink, socket: socket)
        let context = Unmanaged.passRetained(transfer)
        defer { context.release() }
        var list: UnsafeMutablePointer<curl_slist>?
        // No 100-continue round trip: the body follows the headers at once.
        for header in headers.map({ "\($0.name): \($0.value)" }) + ["Expect:"] { list = curl_slist_append(list, header) }
        defer { curl_slist_free_all(list) }
        albumfs_curl_set_string(handle, CURLOPT_URL, url)
        albumfs_curl_track_socket(handle, socket)
        albumfs_curl_set_pointer(handle, CURLOPT_HTTPHEADER, list)
        albumfs_curl_set_long(handle, CURLOPT_NOSIGNAL, 1)
        albumfs_curl_set_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Int(timeouts.connect * 1000))
        albumfs_curl_set_long(handle, CURLOPT_LOW_SPEED_LIMIT, 1)
        albumfs_curl_set_long(handle, CURLOPT_LOW_SPEED_TIME, Int(timeouts.stall.rounded(.up)))
        albumfs_curl_set_callback(handle, CURLOPT_HEADERFUNCTION, Transfer.header)
        albumfs_curl_set_pointer(handle, CURLOPT_HEADERDATA, context.toOpaque())
        albumfs_curl_set_callback(handle, CURLOPT_WRITEFUNCTION, Transfer.write)
        if case .file = sink { albumfs_curl_set_long(handle, CURLOPT_BUFFERSIZE, Self.fileBufferSize) }
        albumfs_curl_set_pointer(handle, CURLOPT_WRITEDATA, context.toOpaque())
        switch method {
        case "GET": break
        case "HEAD": albumfs_curl_set_long(handle, CURLOPT_NOBODY, 1)
        case "PUT":
            albumfs_curl_set_long(handle, CURLOPT_UPLOAD, 1)
            albumfs_curl_set_offset(handle, CURLOPT_INFILESIZE_LARGE, curl_off_t(transfer.bodyLength))
            albumfs_curl_set_callback(handle, CURLOPT_READFUNCTION, Transfer.read)
            albumfs_curl_set_pointer(handle, CURLOPT_READDATA, context.toOpaque())
        case "POST":
            albumfs_curl_set_long(handle, CURLOPT_POST, 1)
            albumfs_curl_set_offset(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(transfer.bodyLength))
            albumfs_curl_set_callback(handle, CURLOPT_READFUNCTION, Transfer.read)
            albumfs_curl_set_pointer(handle, CURLOPT_READDATA, context.toOpaque())
        default: albumfs_curl_set_string(handle, CURLOPT_CUSTOMREQUEST, method)
        }
        let code = curl_easy_perform(handle)
        if let failure = transfer.failure { throw failure }
        guard code == CURLE_OK else {
            throw .unreachable("\(method) \(url): \(String(cString: curl_easy_strerror(code)))")
        }
        var status = 0
        albumfs_curl_response_code(handle, &status)
        return Response(status: status, headers: transfer.headers, body: transfer.received, received: transfer.receivedCount)
    }

    /// What one request reads from and writes to, reached from libcurl's callbacks.
    private final class Transfer {
        let body: Body
        let sink: Sink
        var sent: Int64 = 0
        var received: [UInt8] = []
        var receivedCount: Int64 = 0
        var headers: [String: String] = [:]
        /// The status line's code, once the headers came.
        var status = 0
        var failure: ObjectStoreError?
        /// The connection's socket, as curl made it.
        let socket: UnsafeMutablePointer<curl_socket_t>

        init(body: Body, sink: Sink, socket: UnsafeMutablePointer<curl_socket_t>) {
            (self.body, self.sink, self.socket) = (body, sink, socket)
        }

        var bodyLength: Int64 {
            switch body {
            case .none: return 0
            case .bytes(let bytes): return Int64(bytes.count)
            case .file(_, _, let length): return length
            }
        }

        static let read: albumfs_curl_data_callback = { buffer, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let room = size * count
            let left = Int(transfer.bodyLength - transfer.sent)
            let n = min(room, left)
            guard n > 0, let buffer else { return 0 }
            switch transfer.body {
            case .none: return 0
            case .bytes(let bytes):
                bytes.withUnsafeBytes { raw in
                    UnsafeMutableRawPointer(buffer).copyMemory(from: raw.baseAddress! + Int(transfer.sent), byteCount: n)
                }
                transfer.sent += Int64(n)
                return n
            case .file(let descriptor, let offset, _):
                let got = pread(descriptor, buffer, n, off_t(offset + transfer.sent))
                guard got > 0 else {
                    transfer.failure = .local("reading the file to upload: \(got < 0 ? String(cString: strerror(errno)) : "it is shorter than said")")
                    return Int(CURL_READFUNC_ABORT)
                }
                transfer.sent += Int64(got)
                return got
            }
        }

        static let write: albumfs_curl_data_callback = { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let n = size * count
            guard let data, n > 0 else { return 0 }
            switch transfer.sink {
            case .file(let descriptor, let offset, let limit, let observer) where (200..<300).contains(transfer.status):
                guard transfer.receivedCount + Int64(n) <= limit else {
                    transfer.failure = .server(status: transfer.status, code: "",
                                               message: "more than the \(limit) bytes asked for came")
                    return 0
                }
                var done = 0
                while done < n {
                    let wrote = pwrite(descriptor, data + done, n - done, off_t(offset + transfer.receivedCount + Int64(done)))
                    if wrote < 0 && errno == EINTR { continue }
                    guard wrote > 0 else {
                        transfer.failure = .local("writing what was fetched: \(String(cString: strerror(errno)))")
                        return 0
                    }
                    done += wrote
                }
                guard observer(UnsafeRawBufferPointer(start: data, count: n)) else {
                    transfer.failure = .local("the receiver stopped the transfer")
                    return 0
                }
            case .memory, .file:
                transfer.received += UnsafeRawBufferPointer(start: data, count: n)
            }
            transfer.receivedCount += Int64(n)
            return n
        }

        static let header: albumfs_curl_data_callback = { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let n = size * count
            guard let data else { return n }
            let line = String(decoding: UnsafeRawBufferPointer(start: data, count: n), as: UTF8.self)
            if line.hasPrefix("HTTP/") {   // a new response (after a redirect or 100)
                transfer.headers = [:]
                transfer.status = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            }
            if let colon = line.firstIndex(of: ":") {
                let name = line[..<colon].lowercased()
                let value = line[line.index(after: colon)...].trimmingBlanks
                transfer.headers[name] = value
            }
            // The headers' end: acknowledged now, so a server with Nagle on sends the body at once
            // (not after the 40 ms delayed ACK: each small GET on a kept-alive connection took 40 ms).
            if n == 2 && data[0] == 0x0D && data[1] == 0x0A { albumfs_acknowledge_now(transfer.socket.pointee) }
            return n
        }
    }
}
