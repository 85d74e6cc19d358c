import Glibc

/// Why a mount failed, in one line: what libfuse or fusermount3 said, and the
/// fix where there is one.
struct MountFailureReason: CustomStringConvertible {
    let mountPoint: String
    /// What libfuse and fusermount3 wrote to standard error.
    let said: String

    var description: String {
        let lines = said.split(separator: "\n").map { $0.trimmingCharacters() }.filter { !$0.isEmpty }
        var text = "cannot mount on \(mountPoint)"
        if !lines.isEmpty { text += ": " + lines.joined(separator: "; ") }
        if let fix { text += " (fix: \(fix))" }
        return text
    }

    private var fix: String? {
        if said.contains("user_allow_other") {
            return "as root, add the line user_allow_other to /etc/fuse.conf"
        }
        if said.contains("/dev/fuse") && (said.contains("Permission denied") || said.contains("Operation not permitted")) {
            var info = stat()
            if stat("/dev/fuse", &info) == 0, let group = getgrgid(info.st_gid), info.st_gid != 0 {
                let name = String(cString: group.pointee.gr_name)
                return "/dev/fuse is for group \(name): sudo usermod -aG \(name) $USER, then log in again"
            }
            return "as root, chmod 0666 /dev/fuse, so that users may open it"
        }
        if said.contains("no write access to mountpoint") || said.contains("not owned") {
            return "mount on a directory you own"
        }
        return nil
    }
}

/// Runs `body` with standard error going into a pipe (children too: libfuse
/// runs fusermount3), then puts it back, writes what was said to it as well
/// (so `-f` still shows it), and returns that text. A write that would fill
/// the pipe fails instead of blocking: the text is short, the mount is not
/// held up by it.
func capturingStandardError<T>(_ body: () -> T) -> (T, String) {
    var ends: [Int32] = [0, 0]
    guard pipe(&ends) == 0 else { return (body(), "") }
    let (readEnd, writeEnd) = (ends[0], ends[1])
    defer { close(readEnd) }
    _ = fcntl(readEnd, F_SETFL, fcntl(readEnd, F_GETFL) | O_NONBLOCK)
    _ = fcntl(writeEnd, F_SETFL, fcntl(writeEnd, F_GETFL) | O_NONBLOCK)
    let saved = dup(2)
    dup2(writeEnd, 2)
    close(writeEnd)
    let result = body()
    dup2(saved, 2)
    close(saved)
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = read(readEnd, &chunk, chunk.count)
        if n <= 0 { break }
        bytes += chunk[..<n]
    }
    if !bytes.isEmpty { _ = write(2, bytes, bytes.count) }
    return (result, String(decoding: bytes, as: UTF8.self))
}

extension Substring {
    func trimmingCharacters() -> String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}
