#if canImport(Glibc)
import Glibc
#endif
import Digests

/// AWS Signature Version 4 for S3, written here because Debian 12's libcurl
/// mis-signs requests with a query string and hashes no payload
/// (shared/OBJECT-STORE-NOTES.md): HMAC-SHA256 over a canonical form of the
/// request, with a key derived from the secret, the day, the region and the
/// service. Pure: the time is given.
struct SigV4: Sendable {
    let credentials: Credentials
    let region: String
    let service = "s3"

    struct Request {
        var method: String
        /// The path as sent: each segment already URI-encoded (`S3Path.encode`).
        var path: String
        var query: [(name: String, value: String)] = []
        /// Headers to sign (Host among them); names in any case.
        var headers: [(name: String, value: String)]
        /// The hex SHA-256 of the body (or `UNSIGNED-PAYLOAD`).
        var payloadHash: String
    }

    /// The headers to add to `request` at `time` (seconds since the epoch):
    /// x-amz-date, x-amz-content-sha256, x-amz-security-token (if any) and
    /// Authorization.
    func sign(_ request: Request, at time: Int) -> [(name: String, value: String)] {
        let (amzDate, day) = Self.timestamps(time)
        var added: [(name: String, value: String)] = [("x-amz-date", amzDate), ("x-amz-content-sha256", request.payloadHash)]
        if let token = credentials.sessionToken { added.append(("x-amz-security-token", token)) }
        let headers = (request.headers + added)
            .map { (name: $0.name.lowercased(), value: Self.trim($0.value)) }
            .sorted { $0.name < $1.name }
        let signedHeaders = headers.map(\.name).joined(separator: ";")
        let encoded: [(String, String)] = request.query.map { pair in
            (S3Path.encode(pair.name, keepingSlashes: false), S3Path.encode(pair.value, keepingSlashes: false))
        }
        let sortedQuery = encoded.sorted { a, b in a.0 == b.0 ? a.1 < b.1 : a.0 < b.0 }
        let canonicalQuery = sortedQuery.map { pair in pair.0 + "=" + pair.1 }.joined(separator: "&")
        let canonicalHeaders = headers.map { header in header.name + ":" + header.value + "\n" }.joined()
        let canonicalRequest = [request.method, request.path, canonicalQuery, canonicalHeaders, signedHeaders,
                                request.payloadHash].joined(separator: "\n")
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope,
                            SHA256.hex(SHA256.digest(Array(canonicalRequest.utf8)))].joined(separator: "\n")
        var key = Array("AWS4\(credentials.secretKey)".utf8)
        for part in [day, region, service, "aws4_request"] { key = SHA256.hmac(key: key, Array(part.utf8)) }
        let signature = SHA256.hex(SHA256.hmac(key: key, Array(stringToSign.utf8)))
        added.append(("Authorization", "AWS4-HMAC-SHA256 Credential=\(credentials.accessKey)/\(scope),"
                        + "SignedHeaders=\(signedHeaders),Signature=\(signature)"))
        return added
    }

    /// `YYYYMMDDTHHMMSSZ` and `YYYYMMDD` of `time`, in UTC.
    static func timestamps(_ time: Int) -> (String, String) {
        var seconds = time_t(time)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let day = "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))"
        return ("\(day)T\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z", day)
    }

    /// A header value as signed: no leading or trailing blanks, inner runs of blanks as one.
    private static func trim(_ value: String) -> String {
        value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
    }
}

/// Paths and query values as S3 wants them: RFC 3986's unreserved
/// characters as they are, every other byte %XX (uppercase).
enum S3Path {
    static func encode(_ text: String, keepingSlashes: Bool) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.append(Character(UnicodeScalar(byte)))
            case UInt8(ascii: "/") where keepingSlashes:
                out.append("/")
            default:
                let digits = Array("0123456789ABCDEF")
                out += "%\(digits[Int(byte >> 4)])\(digits[Int(byte & 0x0f)])"
            }
        }
        return out
    }
}
