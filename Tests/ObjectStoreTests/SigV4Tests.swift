import Digests
import Testing
@testable import ObjectStore

@Suite("SigV4: requests signed as S3 checks them")
struct SigV4Tests {
    /// AWS's worked example of a signed S3 GET (the S3 API reference,
    /// "Signature Calculations for the Authorization Header", GET Object).
    @Test("AWS's GET Object example gives AWS's signature")
    func awsExample() {
        let signer = SigV4(credentials: Credentials(accessKey: "AKIAIOSFODNN7EXAMPLE",
                                                     secretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
                           region: "us-east-1")
        let request = SigV4.Request(method: "GET", path: "/test.txt",
                                    headers: [("Host", "examplebucket.s3.amazonaws.com"), ("Range", "bytes=0-9")],
                                    payloadHash: SHA256.empty)
        // 2013-05-24T00:00:00Z
        let headers = Dictionary(uniqueKeysWithValues: signer.sign(request, at: 1_369_353_600).map { ($0.name, $0.value) })
        #expect(headers["x-amz-date"] == "20130524T000000Z")
        #expect(headers["Authorization"] == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
                + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
                + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    }

    @Test("keys and query values are encoded as RFC 3986 says, slashes kept in paths only")
    func encoding() {
        #expect(S3Path.encode("a b/c~d_e.f-g", keepingSlashes: true) == "a%20b/c~d_e.f-g")
        #expect(S3Path.encode("a/b+c=d&é", keepingSlashes: false) == "a%2Fb%2Bc%3Dd%26%C3%A9")
    }

    @Test("the empty payload's hash is SHA-256 of nothing")
    func emptyHash() {
        #expect(SHA256.hex(SHA256.digest([])) == SHA256.empty)
    }
}

@Suite("Object store: what it answers, read")
struct ObjectStoreParsingTests {
    @Test("a listing's LastModified (ISO 8601, UTC) in seconds since 1970; anything else is not a time")
    func lastModified() {
        #expect(ObjectInfo.seconds(iso8601: "2026-12-05T01:20:00.000Z") == 1_796_433_600)
        #expect(ObjectInfo.seconds(iso8601: "1999-01-31T23:59:59Z") == 917_827_199)
        #expect(ObjectInfo.seconds(iso8601: "2026-12-05 01:20:00") == nil)
        #expect(ObjectInfo.seconds(iso8601: "2026-1x-05T01:20:00.000Z") == nil)
    }

    @Test("a listing's keys, sizes and ETags, entities unescaped")
    func listing() {
        let xml: Substring = """
            <?xml version="1.0"?><ListBucketResult><IsTruncated>true</IsTruncated>
            <Contents><Key>p/a&amp;b.jpg</Key><Size>12</Size><ETag>&quot;abc&quot;</ETag></Contents>
            <Contents><Key>p/c</Key><Size>0</Size><ETag>"d"</ETag></Contents>
            <NextContinuationToken>tok</NextContinuationToken></ListBucketResult>
            """
        let entries = XMLFields.elements("Contents", in: xml)
        #expect(entries.count == 2)
        #expect(XMLFields.value("Key", in: entries[0]) == "p/a&b.jpg")
        #expect(XMLFields.value("ETag", in: entries[0]) == "\"abc\"")
        #expect(XMLFields.value("NextContinuationToken", in: xml) == "tok")
    }

    @Test("virtual-host addressing for AWS endpoints and dot-free buckets, path-style for every other store")
    func addressing() throws {
        let aws = try RemoteLocation(url: "s3://photos/alice", endpoint: "https://s3.eu-west-1.amazonaws.com", region: "eu-west-1")
        #expect(aws.addressing == .virtualHost && aws.host == "photos.s3.eu-west-1.amazonaws.com"
                && aws.base == "https://photos.s3.eu-west-1.amazonaws.com")
        #expect(try RemoteLocation(url: "s3://my.photos/a", endpoint: "https://s3.amazonaws.com").addressing == .path)
        let nas = try RemoteLocation(url: "s3://photos/alice", endpoint: "http://nas:7480")
        #expect(nas.addressing == .path && nas.host == "nas:7480" && nas.base == "http://nas:7480")
    }

    @Test("s3://BUCKET/PREFIX on an endpoint; bad ones are refused with a reason")
    func locations() throws {
        let location = try RemoteLocation(url: "s3://photos/alice/lib", endpoint: "http://127.0.0.1:7480/")
        #expect(location.bucket == "photos" && location.prefix == "alice/lib/" && location.endpoint == "http://127.0.0.1:7480")
        #expect(location.host == "127.0.0.1:7480")
        #expect(try RemoteLocation(url: "s3://photos", endpoint: "https://s3.example").prefix == "")
        #expect(throws: ObjectStoreError.self) { try RemoteLocation(url: "photos/alice", endpoint: "http://x") }
        #expect(throws: ObjectStoreError.self) { try RemoteLocation(url: "s3://Photos", endpoint: "http://x") }
        #expect(throws: ObjectStoreError.self) { try RemoteLocation(url: "s3://photos", endpoint: "nas:7480") }
    }

    @Test("keys from the environment first, else the named profile of the credentials file")
    func credentials() {
        #expect(Credentials.load(environment: ["AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"]) == Credentials(accessKey: "k", secretKey: "s"))
        let file = """
            # comment
            [default]
            aws_access_key_id = dk
            aws_secret_access_key=ds
            [nas]
            aws_access_key_id = nk
            aws_secret_access_key = ns
            aws_session_token = t
            """
        #expect(Credentials.parse(file, profile: "nas") == Credentials(accessKey: "nk", secretKey: "ns", sessionToken: "t"))
        #expect(Credentials.parse(file, profile: "default") == Credentials(accessKey: "dk", secretKey: "ds"))
        #expect(Credentials.parse(file, profile: "none") == nil)
    }
}
