/// Where a library's objects live: `s3://BUCKET/PREFIX` on an endpoint
/// (`http://nas:7480`), in a region (any name for stores that have none).
/// Requests are path-style (`ENDPOINT/BUCKET/KEY`), which every
/// S3-compatible store takes.
public struct RemoteLocation: Sendable, Equatable, CustomStringConvertible {
    public let endpoint: String
    public let bucket: String
    /// Keys start with it, `/`-terminated ("" for none).
    public let prefix: String
    public let region: String

    /// Parses `s3://BUCKET[/PREFIX]`; nil with a reason when it is not one.
    public init(url: String, endpoint: String, region: String = "us-east-1") throws(ObjectStoreError) {
        guard url.hasPrefix("s3://") else { throw .corrupt("\(url) is not an s3://BUCKET/PREFIX address") }
        let rest = url.dropFirst(5).split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard let bucket = rest.first, Self.isBucketName(bucket) else {
            throw .corrupt("\(url): a bucket name is 3 to 63 lowercase letters, digits, dots and hyphens")
        }
        guard endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://") else {
            throw .corrupt("the endpoint \(endpoint) is not an http:// or https:// address")
        }
        var trimmed = endpoint
        while trimmed.hasSuffix("/") { trimmed.removeLast() }
        self.endpoint = trimmed
        self.bucket = bucket
        self.prefix = rest.count > 1 ? rest.dropFirst().joined(separator: "/") + "/" : ""
        self.region = region
    }

    public var description: String { "s3://\(bucket)/\(prefix) at \(endpoint)" }

    /// The host (and port) the endpoint names: the signed Host header.
    var host: String {
        let afterScheme = endpoint.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: true)
        return afterScheme.count > 1 ? String(afterScheme[1]) : endpoint
    }

    static func isBucketName(_ name: String) -> Bool {
        (3...63).contains(name.utf8.count) && name.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
        }
    }
}
