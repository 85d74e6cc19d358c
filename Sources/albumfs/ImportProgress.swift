import Glibc

/// What `albumfs import` tells its user. On a terminal: one bar redrawn in
/// place (files, bytes, rate, time left), at most ten times a second, with
/// failures printed above it. Otherwise (a pipe, a log): one line per event,
/// written at once (a reader of the pipe sees each file as it is done).
final class ImportProgress {
    struct Totals {
        var files = 0
        var bytes: Int64 = 0
    }

    let onTerminal: Bool
    private let total: Totals
    private var done = Totals()
    /// Bytes of the file being copied, so far.
    private var current: Int64 = 0
    private let started = monotonicSeconds()
    private var lastDrawn = 0.0
    private var barShown = false

    init(total: Totals, onTerminal: Bool = isatty(STDOUT_FILENO) == 1) {
        self.total = total
        self.onTerminal = onTerminal
    }

    // MARK: events

    /// A line that is not about one file (waiting for the index, …).
    func note(_ line: String) {
        if onTerminal { clearBar() }
        emit(line + "\n", to: STDOUT_FILENO)
        if onTerminal { draw(force: true) }
    }

    /// One file is done, whatever became of it; `line` says what (not shown
    /// on a terminal unless `always`).
    func finished(_ line: String, bytes: Int64, always: Bool = false, toStandardError: Bool = false) {
        done.files += 1
        done.bytes += bytes
        current = 0
        if onTerminal {
            if always { clearBar(); emit(line + "\n", to: toStandardError ? STDERR_FILENO : STDOUT_FILENO) }
            draw(force: always)
        } else {
            emit(line + "\n", to: toStandardError ? STDERR_FILENO : STDOUT_FILENO)
        }
    }

    /// Bytes copied of the current file so far.
    func copying(_ bytes: Int64) {
        current = bytes
        if onTerminal { draw(force: false) }
    }

    /// The last line: the bar goes, the summary stays.
    func summary(_ line: String) {
        if onTerminal { draw(force: true); emit("\n", to: STDOUT_FILENO) }
        emit(line + "\n", to: STDOUT_FILENO)
    }

    var elapsed: Double { monotonicSeconds() - started }

    // MARK: the bar

    private func draw(force: Bool) {
        let now = monotonicSeconds()
        guard force || now - lastDrawn >= 0.1 else { return }
        lastDrawn = now
        let line = Self.bar(files: done.files, of: total.files, bytes: done.bytes + current, of: total.bytes,
                            seconds: now - started)
        emit("\r" + Self.fitted(line, columns: Self.columns()) + "\u{1B}[K", to: STDOUT_FILENO)
        barShown = true
    }

    private func clearBar() {
        if barShown { emit("\r\u{1B}[K", to: STDOUT_FILENO) }
    }

    /// `[#######·············]  123/500 files  45.2/180.0 MiB  12.3 MiB/s  0:11 left`
    /// The time left is the larger of what the bytes and the files left
    /// say at the rates so far (small files cost their round trips more
    /// than their bytes).
    static func bar(files: Int, of totalFiles: Int, bytes: Int64, of totalBytes: Int64, seconds: Double) -> String {
        let width = 20
        let fraction = totalBytes > 0 ? min(1, Double(bytes) / Double(totalBytes))
                                      : (totalFiles > 0 ? Double(files) / Double(totalFiles) : 1)
        let filled = Int(fraction * Double(width))
        let rate = seconds > 0 ? Double(bytes) / seconds : 0
        let fileRate = seconds > 0 ? Double(files) / seconds : 0
        var left: Double?
        if rate > 0 && fileRate > 0 {
            left = max(Double(totalBytes - bytes) / rate, Double(totalFiles - files) / fileRate)
        }
        return "[" + String(repeating: "#", count: filled) + String(repeating: "·", count: width - filled) + "]"
            + "  \(files)/\(totalFiles) files  \(mebibytes(bytes))/\(mebibytes(totalBytes)) MiB"
            + "  \(mebibytes(Int64(rate))) MiB/s  " + (left.map { clock($0) + " left" } ?? "-:-- left")
    }

    /// A line that wraps can no longer be redrawn with `\r`: on a narrow
    /// terminal the bar's picture goes first, then the end of the text.
    static func fitted(_ line: String, columns: Int) -> String {
        guard columns > 0, line.count >= columns else { return line }
        let text = line.drop(while: { $0 != "]" }).dropFirst(3)
        return String(text.prefix(columns - 1))
    }

    /// The terminal's width (TIOCGWINSZ), or 0 when unknown.
    static func columns() -> Int {
        var size = winsize()
        return systemIoctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0 ? Int(size.ws_col) : 0
    }

    /// Bytes as MiB with one decimal.
    static func mebibytes(_ bytes: Int64) -> String {
        let tenths = (bytes * 10 + 524_288) / 1_048_576
        return "\(tenths / 10).\(tenths % 10)"
    }

    /// `m:ss`, or `h:mm:ss` past an hour.
    static func clock(_ seconds: Double) -> String {
        let total = Int(seconds.rounded(.up))
        let (h, m, s) = (total / 3600, total / 60 % 60, total % 60)
        let ss = (s < 10 ? "0" : "") + String(s)
        return h > 0 ? "\(h):\(m < 10 ? "0" : "")\(m):\(ss)" : "\(m):\(ss)"
    }

    private func emit(_ text: String, to fd: Int32) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }
}

/// ioctl(2) with its one pointer argument (Swift does not import C variadics).
@_silgen_name("ioctl")
private func systemIoctl(_ fd: Int32, _ request: UInt, _ argument: UnsafeMutableRawPointer) -> Int32
