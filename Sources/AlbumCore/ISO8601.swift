#if canImport(Glibc)
import Glibc
#endif

enum ISO8601 {
    /// `2026-11-30T12:00:00Z`.
    static func utc(_ time: Nanoseconds) -> String {
        var seconds = time_t(time / 1_000_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return format(parts, "%Y-%m-%dT%H:%M:%SZ")
    }

    /// `2026-11-30T13:00:00`: local time, no zone (a .trashinfo's DeletionDate).
    static func local(_ time: Nanoseconds) -> String {
        var seconds = time_t(time / 1_000_000_000)
        var parts = tm()
        localtime_r(&seconds, &parts)
        return format(parts, "%Y-%m-%dT%H:%M:%S")
    }

    private static func format(_ parts: tm, _ format: String) -> String {
        var parts = parts
        var text = [CChar](repeating: 0, count: 32)
        let length = strftime(&text, text.count, format, &parts)
        return String(decoding: text.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
