#if canImport(Glibc)
import Glibc
#endif
import Digests

/// What an object is, as a listing or a HEAD says.
public struct ObjectInfo: Sendable, Equatable {
    /// The key under the location's prefix (the prefix taken off).
    public let key: String
    public let size: Int64
    public let etag: String
    /// `x-amz-meta-*` (HEAD only), names in lower case without the prefix.
    public var metadata: [String: String] = [:]
    /// When it was last written, in seconds since 1970 by the store's clock (listings only; nil: not said).
    public var lastModified: Int64?

    /// `2026-12-05T01:20:00.000Z` (a listing's `LastModified`, ISO 8601 in UTC) in seconds since 1970.
    static func seconds(iso8601 text: String) -> Int64? {
        let digits = Array(text.utf8)
        guard digits.count >= 20, digits[4] == 0x2D, digits[7] == 0x2D, digits[10] == 0x54, digits.last == 0x5A else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            guard digits[range].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return digits[range].reduce(Int32(0)) { $0 * 10 + Int32($1 - 0x30) }
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19) else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        return Int64(timegm(&parts))
    }
}

/// The S3 requests albumfs makes, signed with SigV4, over one kept-alive
/// connection. Not for sharing between threads: each worker has its own.
public final class S3Client {
    public let location: RemoteLocation
    private let signer: SigV4
    private let connection: HTTPConnection
    /// The clock signatures use (tests set it; S3 refuses one 15 minutes off).
    var now: () -> Int = { Int(time(nil)) }

    public init(location: RemoteLocation, credentials: Credentials, timeouts: RequestTimeouts = RequestTimeouts()) throws(ObjectStoreError) {
        self.location = location
        self.signer = SigV4(credentials: credentials, region: location.region)
        self.connection = try HTTPConnection(timeouts: timeouts)
    }

    // MARK: the bucket

    /// Creates the bucket; one that exists and is ours is fine.
    public func createBucket() throws(ObjectStoreError) {
        let response = try send("PUT", path: bucketPath, body: .none)
        if response.status == 409, Self.errorCode(response) == "BucketAlreadyOwnedByYou" { return }
        try Self.check(response, "create bucket \(location.bucket)")
    }

    // MARK: objects

    /// Stores `bytes` as `key`. `ifNoneMatch`: only if no object has that
    /// key; `ifMatch`: only if the object's ETag is that one (a lost race is
    /// `.preconditionFailed`). Returns the ETag.
    @discardableResult
    public func put(_ key: String, bytes: [UInt8], metadata: [String: String] = [:],
                    ifNoneMatch: Bool = false, ifMatch: String? = nil) throws(ObjectStoreError) -> String {
        try put(key, body: .bytes(bytes), sha256: SHA256.hex(SHA256.digest(bytes)), metadata: metadata,
                ifNoneMatch: ifNoneMatch, ifMatch: ifMatch)
    }

    /// Stores `length` bytes of the open file `descriptor` as `key`;
    /// `sha256` is their hex SHA-256 (signed: the store checks the body against it).
    @discardableResult
    public func put(_ key: String, file descriptor: Int32, length: Int64, sha256: String, metadata: [String: String] = [:],
                    ifNoneMatch: Bool = false) throws(ObjectStoreError) -> String {
        try put(key, body: .file(descriptor: descriptor, offset: 0, length: length), sha256: sha256,
                metadata: metadata, ifNoneMatch: ifNoneMatch)
    }

    private func put(_ key: String, body: HTTPConnection.Body, sha256: String, metadata: [String: String],
                     ifNoneMatch: Bool, ifMatch: String? = nil) throws(ObjectStoreError) -> String {
        var headers = metadata.sorted { $0.key < $1.key }.map { (name: "x-amz-meta-\($0.key.lowercased())", value: $0.value) }
        if ifNoneMatch { headers.append(("If-None-Match", "*")) }
        // (radosgw compares the value as it is: quoted, it never matches.)
        if let ifMatch { headers.append(("If-Match", ifMatch)) }
        let response = try send("PUT", path: objectPath(key), headers: headers, body: body, payloadHash: sha256)
        try Self.check(response, "put \(key)")
        return response.headers["etag"].map(Self.unquote) ?? ""
    }

    /// The object's bytes (`range`: only those, as offsets from 0).
    public func get(_ key: String, range: Range<Int64>? = nil) throws(ObjectStoreError) -> [UInt8] {
        try get(key, range: range, into: .memory).body
    }

    /// Writes the object (or `range` of it: at most its length) into
    /// `descriptor` at `offset`, each piece then shown to `observe` (in
    /// order), whose false stops the transfer with an error; returns how many
    /// bytes came. After an error what was written is not to be trusted.
    public func get(_ key: String, range: Range<Int64>? = nil, into descriptor: Int32, at offset: Int64 = 0,
                    observing observe: (UnsafeRawBufferPointer) -> Bool = { _ in true }) throws(ObjectStoreError) -> Int64 {
        let limit = range.map { Int64($0.count) } ?? .max
        return try withoutActuallyEscaping(observe) { (observe) throws(ObjectStoreError) in
            try get(key, range: range, into: .file(descriptor: descriptor, offset: offset, limit: limit, observer: observe)).received
        }
    }

    private func get(_ key: String, range: Range<Int64>?, into sink: HTTPConnection.Sink) throws(ObjectStoreError) -> HTTPConnection.Response {
        var headers: [(name: String, value: String)] = []
        if let range {
            guard !range.isEmpty else { return HTTPConnection.Response(status: 200, headers: [:], body: [], received: 0) }
            headers.append(("Range", "bytes=\(range.lowerBound)-\(range.upperBound - 1)"))
        }
        let response = try send("GET", path: objectPath(key), headers: headers, body: .none, into: sink)
        try Self.check(response, "get \(key)")
        return response
    }

    /// The object's bytes and ETag; nil when there is none.
    public func getWithETag(_ key: String) throws(ObjectStoreError) -> (bytes: [UInt8], etag: String)? {
        let response = try send("GET", path: objectPath(key), body: .none, into: .memory)
        if response.status == 404 { return nil }
        try Self.check(response, "get \(key)")
        return (response.body, response.headers["etag"].map(Self.unquote) ?? "")
    }

    /// The object's size, ETag and metadata; nil when there is none.
    public func head(_ key: String) throws(ObjectStoreError) -> ObjectInfo? {
        let response = try send("HEAD", path: objectPath(key), body: .none)
        if response.status == 404 { return nil }
        try Self.check(response, "head \(key)")
        var metadata: [String: String] = [:]
        for (name, value) in response.headers where name.hasPrefix("x-amz-meta-") {
            metadata[String(name.dropFirst("x-amz-meta-".count))] = value
        }
        return ObjectInfo(key: key, size: Int64(response.headers["content-length"] ?? "") ?? 0,
                          etag: response.headers["etag"].map(Self.unquote) ?? "", metadata: metadata)
    }

    /// Removes the object (none there is fine, as S3 says).
    public func delete(_ key: String) throws(ObjectStoreError) {
        let response = try send("DELETE", path: objectPath(key), body: .none)
        if response.status == 404 { return }
        try Self.check(response, "delete \(key)")
    }

    /// Every object under the location's prefix + `prefix`, in key order,
    /// `pageSize` a request (ListObjectsV2, continued until the end).
    public func list(_ prefix: String = "", pageSize: Int = 1000) throws(ObjectStoreError) -> [ObjectInfo] {
        var found: [ObjectInfo] = []
        var token: String?
        repeat {
            var query: [(name: String, value: String)] = [("list-type", "2"), ("max-keys", String(pageSize)),
                                                          ("prefix", location.prefix + prefix)]
            if let token { query.append(("continuation-token", token)) }
            let response = try send("GET", path: bucketPath, query: query, body: .none)
            try Self.check(response, "list \(location.prefix + prefix)")
            let xml = Substring(String(decoding: response.body, as: UTF8.self))
            guard xml.contains("<ListBucketResult") else { throw .corrupt("a listing that is no ListBucketResult") }
            for entry in XMLFields.elements("Contents", in: xml) {
                guard let key = XMLFields.value("Key", in: entry), key.hasPrefix(location.prefix),
                      let size = XMLFields.value("Size", in: entry).flatMap({ Int64($0) }) else {
                    throw .corrupt("a listing entry without a key under the prefix or a size")
                }
                found.append(ObjectInfo(key: String(key.dropFirst(location.prefix.count)), size: size,
                                        etag: Self.unquote(XMLFields.value("ETag", in: entry) ?? ""),
                                        lastModified: XMLFields.value("LastModified", in: entry).flatMap(ObjectInfo.seconds(iso8601:))))
            }
            token = XMLFields.value("IsTruncated", in: xml) == "true" ? XMLFields.value("NextContinuationToken", in: xml) : nil
        } while token != nil
        return found
    }

    // MARK: multipart uploads (objects of more than one PUT)

    /// Starts a multipart upload of `key`; returns its upload id.
    public func createMultipartUpload(_ key: String) throws(ObjectStoreError) -> String {
        let response = try send("POST", path: objectPath(key), query: [("uploads", "")], body: .none)
        try Self.check(response, "start a multipart upload of \(key)")
        guard let id = XMLFields.value("UploadId", in: Self.text(response)) else {
            throw .corrupt("a multipart upload started without an UploadId")
        }
        return id
    }

    /// Sends part `number` (from 1): `length` bytes of `descriptor` at
    /// `offset`, whose hex SHA-256 is `sha256`. Returns its ETag.
    public func uploadPart(_ key: String, uploadID: String, number: Int, file descriptor: Int32, offset: Int64,
                           length: Int64, sha256: String) throws(ObjectStoreError) -> String {
        let response = try send("PUT", path: objectPath(key), query: [("partNumber", String(number)), ("uploadId", uploadID)],
                                body: .file(descriptor: descriptor, offset: offset, length: length), payloadHash: sha256)
        try Self.check(response, "put part \(number) of \(key)")
        guard let etag = response.headers["etag"] else { throw .corrupt("part \(number) of \(key) stored without an ETag") }
        return Self.unquote(etag)
    }

    /// Joins the parts (their ETags in order) into the object; returns its ETag.
    public func completeMultipartUpload(_ key: String, uploadID: String, parts: [String]) throws(ObjectStoreError) -> String {
        let xml = "<CompleteMultipartUpload>" + parts.enumerated().map { index, etag in
            "<Part><PartNumber>\(index + 1)</PartNumber><ETag>\"\(etag)\"</ETag></Part>"
        }.joined() + "</CompleteMultipartUpload>"
        let body = Array(xml.utf8)
        let response = try send("POST", path: objectPath(key), query: [("uploadId", uploadID)],
                                headers: [("Content-Type", "application/xml")], body: .bytes(body),
                                payloadHash: SHA256.hex(SHA256.digest(body)))
        try Self.check(response, "complete the multipart upload of \(key)")
        // S3 may answer 200 and put its error in the body.
        let text = Self.text(response)
        if text.contains("<Error>") {
            throw .server(status: response.status, code: XMLFields.value("Code", in: text) ?? "",
                          message: "complete the multipart upload of \(key): " + (XMLFields.value("Message", in: text) ?? ""))
        }
        return XMLFields.value("ETag", in: text).map(Self.unquote) ?? ""
    }

    /// Drops an upload and the parts it stored.
    public func abortMultipartUpload(_ key: String, uploadID: String) throws(ObjectStoreError) {
        let response = try send("DELETE", path: objectPath(key), query: [("uploadId", uploadID)], body: .none)
        if response.status == 404 { return }
        try Self.check(response, "abort the multipart upload of \(key)")
    }

    /// The unfinished multipart uploads of keys starting with `prefix`
    /// (under the location's prefix): (key, upload id), at most 1,000.
    public func multipartUploads(_ prefix: String) throws(ObjectStoreError) -> [(key: String, uploadID: String)] {
        let response = try send("GET", path: bucketPath, query: [("prefix", location.prefix + prefix), ("uploads", "")], body: .none)
        try Self.check(response, "list the multipart uploads of \(prefix)")
        return XMLFields.elements("Upload", in: Self.text(response)).compactMap { upload in
            guard let key = XMLFields.value("Key", in: upload), key.hasPrefix(location.prefix),
                  let id = XMLFields.value("UploadId", in: upload) else { return nil }
            return (String(key.dropFirst(location.prefix.count)), id)
        }
    }

    // MARK: requests

    /// The bucket's path: `/BUCKET`, or `/` on the bucket's own host (virtual-host).
    private var bucketPath: String {
        location.addressing == .virtualHost ? "/" : "/" + S3Path.encode(location.bucket, keepingSlashes: false)
    }

    private func objectPath(_ key: String) -> String {
        (location.addressing == .virtualHost ? "" : bucketPath) + "/" + S3Path.encode(location.prefix + key, keepingSlashes: true)
    }

    private func send(_ method: String, path: String, query: [(name: String, value: String)] = [],
                      headers: [(name: String, value: String)] = [], body: HTTPConnection.Body,
                      payloadHash: String = SHA256.empty,
                      into sink: HTTPConnection.Sink = .memory) throws(ObjectStoreError) -> HTTPConnection.Response {
        let request = SigV4.Request(method: method, path: path, query: query,
                                    headers: headers + [("Host", location.host)], payloadHash: payloadHash)
        let signed = signer.sign(request, at: now())
        let queryString = query.map { "\(S3Path.encode($0.name, keepingSlashes: false))=\(S3Path.encode($0.value, keepingSlashes: false))" }
            .joined(separator: "&")
        let url = location.base + path + (queryString.isEmpty ? "" : "?" + queryString)
        return try connection.perform(method: method, url: url, headers: headers + signed, body: body, into: sink)
    }

    /// A response that is not a success, as the error it is.
    private static func check(_ response: HTTPConnection.Response, _ what: String) throws(ObjectStoreError) {
        switch response.status {
        case 200..<300: return
        case 403: throw .denied("\(what): \(errorCode(response) ?? "403")")
        case 404: throw .notFound(what)
        case 412: throw .preconditionFailed
        default:
            let xml = Substring(String(decoding: response.body, as: UTF8.self))
            throw .server(status: response.status, code: XMLFields.value("Code", in: xml) ?? "",
                          message: "\(what): " + (XMLFields.value("Message", in: xml) ?? ""))
        }
    }

    private static func text(_ response: HTTPConnection.Response) -> Substring {
        Substring(String(decoding: response.body, as: UTF8.self))
    }

    private static func errorCode(_ response: HTTPConnection.Response) -> String? {
        XMLFields.value("Code", in: Substring(String(decoding: response.body, as: UTF8.self)))
    }

    private static func unquote(_ etag: String) -> String {
        etag.count >= 2 && etag.hasPrefix("\"") && etag.hasSuffix("\"") ? String(etag.dropFirst().dropLast()) : etag
    }
}
