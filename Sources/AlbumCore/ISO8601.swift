#if canImport(Glibc)
import Glibc
#endif

enum ISO8601 {
    /// `2026-11-30T12:00:00Z`.
    static func utc(_ time: Nanoseconds) -> String {
        var seconds = time_t(time / 1_000_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var text = [CChar](repeating: 0, count: 32)
        let length = strftime(&text, text.count, "%Y-%m-%dT%H:%M:%SZ", &parts)
        return String(decoding: text.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
