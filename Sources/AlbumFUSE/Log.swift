import Glibc

/// Messages to standard error with one write(2) each, so lines from
/// concurrent threads never interleave (the C `stderr` global is not
/// concurrency-safe in Swift 6).
public enum Log {
    public static func error(_ message: String) {
        write("albumfs: " + message + "\n")
    }

    private static func write(_ line: String) {
        var line = line
        line.withUTF8 { bytes in _ = Glibc.write(2, bytes.baseAddress, bytes.count) }
    }
}
