#if canImport(Glibc)
import Glibc
#endif

/// Capture dates as albumfs shows them: ISO 8601 with the offset the file
/// gives, `Z` for QuickTime's UTC `mvhd` time, none when the file gives none
/// (a floating local time). Everything is validated: a date that does not
/// parse is no date.
enum CaptureDate {
    /// EXIF `2019:07:14 09:30:00` (DateTimeOriginal) with an optional
    /// OffsetTimeOriginal `+02:00` → `2019-07-14T09:30:00+02:00`.
    static func exif(_ dateTime: String, offset: String?) -> String? {
        let b = Array(dateTime.utf8)
        guard b.count >= 19, b[4] == 0x3A, b[7] == 0x3A, b[10] == 0x20 || b[10] == 0x54,
              b[13] == 0x3A, b[16] == 0x3A else { return nil }
        guard let local = localTime(b, dateSeparator: 0x3A) else { return nil }
        guard let offset, let zone = zone(Array(offset.utf8)[...]) else { return local }
        return local + zone
    }

    /// An ISO 8601 text such as Apple's `com.apple.quicktime.creationdate`
    /// (`2019-07-14T09:30:00+0200`, `…T09:30:00.123Z`, `…T09:30:00`), with
    /// the offset normalised to `+02:00`.
    static func iso8601(_ text: String) -> String? {
        let b = Array(text.utf8)
        guard b.count >= 19, b[4] == 0x2D, b[7] == 0x2D, b[10] == 0x54 || b[10] == 0x20,
              b[13] == 0x3A, b[16] == 0x3A, let local = localTime(b, dateSeparator: 0x2D) else { return nil }
        var rest = b[19...]
        if rest.first == 0x2E || rest.first == 0x2C {  // fractional seconds: dropped
            rest = rest.dropFirst().drop { $0 >= 0x30 && $0 <= 0x39 }
        }
        if rest.isEmpty { return local }
        guard let zone = zone(rest) else { return nil }
        return local + zone
    }

    /// QuickTime time: seconds since 1904-01-01 UTC. 0 means "not set".
    static func quickTime(_ seconds: UInt64) -> String? {
        let epochDifference: UInt64 = 2_082_844_800
        guard seconds > epochDifference, seconds - epochDifference <= 253_402_300_799 else { return nil }
        var time = time_t(seconds - epochDifference)
        var parts = tm()
        guard gmtime_r(&time, &parts) != nil else { return nil }
        return format(Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
                      Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec)) + "Z"
    }

    /// `YYYY?MM?DD?HH:MM:SS` from the first 19 bytes, checked field by field.
    private static func localTime(_ b: [UInt8], dateSeparator: UInt8) -> String? {
        guard b[4] == dateSeparator, b[7] == dateSeparator,
              let year = number(b, 0, 4), let month = number(b, 5, 2), let day = number(b, 8, 2),
              let hour = number(b, 11, 2), let minute = number(b, 14, 2), let second = number(b, 17, 2),
              (1...9999).contains(year), (1...12).contains(month), (1...daysIn(month, year)).contains(day),
              (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        return format(year, month, day, hour, minute, second)
    }

    /// `Z`, `+02:00`, `+0200` or `+02` → `Z` or `+02:00`; nil otherwise.
    private static func zone(_ z: ArraySlice<UInt8>) -> String? {
        let b = Array(z)
        if b == [0x5A] { return "Z" }
        guard b.count == 3 || b.count == 5 || b.count == 6, b[0] == 0x2B || b[0] == 0x2D,
              let hours = number(b, 1, 2) else { return nil }
        var minutes = 0
        if b.count == 5 {
            guard let m = number(b, 3, 2) else { return nil }
            minutes = m
        } else if b.count == 6 {
            guard b[3] == 0x3A, let m = number(b, 4, 2) else { return nil }
            minutes = m
        }
        guard hours <= 14, minutes <= 59 else { return nil }
        return (b[0] == 0x2B ? "+" : "-") + pad(hours, 2) + ":" + pad(minutes, 2)
    }

    private static func number(_ b: [UInt8], _ at: Int, _ count: Int) -> Int? {
        guard at + count <= b.count else { return nil }
        var value = 0
        for byte in b[at..<at + count] {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }

    private static func daysIn(_ month: Int, _ year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    private static func format(_ y: Int, _ mo: Int, _ d: Int, _ h: Int, _ mi: Int, _ s: Int) -> String {
        "\(pad(y, 4))-\(pad(mo, 2))-\(pad(d, 2))T\(pad(h, 2)):\(pad(mi, 2)):\(pad(s, 2))"
    }

    static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}

/// Locations as ISO 6709 latitude and longitude in decimal degrees, four
/// decimals (about 11 m, as Apple writes them in videos), no altitude:
/// `+48.8584+002.2945/`.
enum ISO6709 {
    static func format(latitude: Double, longitude: Double) -> String? {
        guard latitude.isFinite, longitude.isFinite, abs(latitude) <= 90, abs(longitude) <= 180 else { return nil }
        return degrees(latitude, width: 2) + degrees(longitude, width: 3) + "/"
    }

    /// Parses `+48.8584+002.2945+035.000/` (Apple's key, QuickTime `©xyz`)
    /// and formats it as above.
    static func normalise(_ text: String) -> String? {
        var numbers: [Double] = []
        var current = ""
        for ch in text {
            if ch == "+" || ch == "-" || ch == "/" {
                if !current.isEmpty {
                    guard let value = Double(current) else { return nil }
                    numbers.append(value)
                }
                current = ch == "/" ? "" : String(ch)
                if ch == "/" { break }
            } else if ch.isASCII && (ch.isNumber || ch == ".") {
                guard !current.isEmpty else { return nil }
                current.append(ch)
            } else {
                return nil
            }
            if numbers.count > 3 { return nil }
        }
        if !current.isEmpty, let value = Double(current) { numbers.append(value) }
        guard numbers.count >= 2 else { return nil }
        return format(latitude: numbers[0], longitude: numbers[1])
    }

    private static func degrees(_ value: Double, width: Int) -> String {
        let scaled = Int((abs(value) * 10_000).rounded())
        let negative = value < 0 && scaled != 0
        return (negative ? "-" : "+") + CaptureDate.pad(scaled / 10_000, width) + "." + CaptureDate.pad(scaled % 10_000, 4)
    }
}
