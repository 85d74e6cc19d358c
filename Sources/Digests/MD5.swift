import CCrypto

/// MD5, for one thing only: the freedesktop thumbnail spec names a
/// thumbnail by the MD5 of its file's URI. Never for anything that must
/// resist an attacker.
public enum MD5 {
    /// 32 lowercase hex digits.
    public static func hex(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = bytes.withUnsafeBytes { EVP_Digest($0.baseAddress, $0.count, &digest, &length, EVP_md5(), nil) }
        return SHA256.hex(Array(digest.prefix(Int(length))))
    }
}
