import CMagic
import Synchronization

/// libmagic's MIME type for the first bytes of a file.
///
/// A `magic_t` is not thread-safe, and loading the database costs a few
/// milliseconds, so opened cookies are kept in a small pool: a reader takes
/// one, uses it alone, and gives it back. Only the checks that can apply to
/// a photo library's files run: no decompression (libmagic would otherwise
/// inflate gzip/bzip2/xz data), no tar, ELF, CDF, CSV, JSON or token checks.
enum MimeSniffer {
    /// libmagic reads no more than this (the bytes it is given are cut here).
    static let window = 64 * 1024

    static let flags: Int32 = MAGIC_MIME_TYPE | MAGIC_NO_CHECK_COMPRESS | MAGIC_NO_CHECK_TAR
        | MAGIC_NO_CHECK_ELF | MAGIC_NO_CHECK_CDF | MAGIC_NO_CHECK_CSV | MAGIC_NO_CHECK_JSON
        | MAGIC_NO_CHECK_TOKENS | MAGIC_NO_CHECK_APPTYPE | MAGIC_NO_CHECK_ENCODING | MAGIC_ERROR

    private final class Cookie: @unchecked Sendable {
        let magic: magic_t
        init?() {
            guard let magic = magic_open(MimeSniffer.flags) else { return nil }
            guard magic_load(magic, nil) == 0 else {
                magic_close(magic)
                return nil
            }
            self.magic = magic
        }
        deinit { magic_close(magic) }
    }

    private static let pool = Mutex<[Cookie]>([])

    /// The MIME type, or nil when libmagic cannot be loaded or gives no answer.
    static func type(of bytes: ArraySlice<UInt8>) -> String? {
        guard let cookie = pool.withLock({ $0.popLast() }) ?? Cookie() else { return nil }
        defer { pool.withLock { if $0.count < 8 { $0.append(cookie) } } }
        // magic_buffer wants a non-null pointer even for an empty file.
        let sample = bytes.isEmpty ? [0][0..<0] : bytes.prefix(window)
        let answer: String? = sample.withUnsafeBytes { raw in
            guard let base = raw.baseAddress, let text = magic_buffer(cookie.magic, base, raw.count) else { return nil }
            return String(cString: text)
        }
        guard let answer, !answer.isEmpty, answer.contains("/") else { return nil }
        return registered[answer] ?? answer
    }

    /// libmagic's older `x-` names for types that have a registered one
    /// (the one exiftool and browsers use).
    static let registered = [
        "audio/x-m4a": "audio/mp4",
        "audio/x-flac": "audio/flac",
        "image/x-ms-bmp": "image/bmp",
    ]
}
