/// Where a library's objects live: `s3://BUCKET/PREFIX` on an endpoint
/// (`http://nas:7480`), in a region (any name for stores that have none),
/// and how requests name the bucket: path-style (`ENDPOINT/BUCKET/KEY`),
/// which every S3-compatible store takes, or virtual-host
/// (`BUCKET.ENDPOINT/KEY`), which AWS prefers.
public struct RemoteLocation: Sendable, Equatable, CustomStringConvertible {
    public enum Addressing: Sendable, Equatable { case path, virtualHost }

    public let endpoint: String
    public let bucket: String
    /// Keys start with it, `/`-terminated ("" for none).
    public let prefix: String
    public let region: String
    public let addressing: Addressing

    /// Parses `s3://BUCKET[/PREFIX]`; nil with a reason when it is not one.
    /// `addressing` nil: virtual-host for an AWS endpoint (`*.amazonaws.com`)
    /// and a bucket without dots (a dotted one breaks its TLS wildcard),
    /// path-style for every other.
    public init(url: String, endpoint: String, region: String = "us-east-1",
                addressing: Addressing? = nil) throws(ObjectStoreError) {
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
        let endpointHost = Self.host(of: trimmed)
        let name = endpointHost.split(separator: ":").first.map(String.init) ?? endpointHost
        self.addressing = addressing
            ?? (name.hasSuffix(".amazonaws.com") && !bucket.contains(".") ? .virtualHost : .path)
    }

    public var description: String { "s3://\(bucket)/\(prefix) at \(endpoint)" }

    /// The host (and port) requests go to: the signed Host header.
    var host: String {
        addressing == .virtualHost ? bucket + "." + Self.host(of: endpoint) : Self.host(of: endpoint)
    }

    /// Where request paths start: the endpoint, or with virtual-host
    /// addressing the bucket's own host on it.
    var base: String {
        guard addressing == .virtualHost else { return endpoint }
        return (endpoint.hasPrefix("https://") ? "https://" : "http://") + host
    }

    private static func host(of endpoint: String) -> String {
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
