import CCrypto

/// SHA-256 and HMAC-SHA256 with libcrypto, for request signatures and
/// payload hashes.
enum Digest {
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        bytes.withUnsafeBytes { raw in
            _ = EVP_Digest(raw.baseAddress, raw.count, &digest, &length, EVP_sha256(), nil)
        }
        return digest
    }

    static func hmacSHA256(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        key.withUnsafeBytes { k in
            message.withUnsafeBytes { m in
                _ = HMAC(EVP_sha256(), k.baseAddress, Int32(k.count), m.baseAddress?.assumingMemoryBound(to: UInt8.self),
                         m.count, &digest, &length)
            }
        }
        return digest
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The SHA-256 of nothing: the payload hash of a request without a body.
    static let emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
}
