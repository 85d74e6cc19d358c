import Glibc

/// `albumfs unmount MOUNTPOINT`: the same as `fusermount3 -u MOUNTPOINT`.
struct UnmountCommand {
    let mountPoint: String

    init(parsing arguments: [String]) throws(CommandFailure) {
        guard arguments.count == 1 else { throw .usage("expected one MOUNTPOINT") }
        mountPoint = arguments[0]
    }

    func run() throws(CommandFailure) -> Int32 {
        let words: [String] = ["fusermount3", "-u", mountPoint]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let rc = posix_spawnp(&pid, "fusermount3", nil, nil, argv, environ)
        guard rc == 0 else { throw CommandFailure(.mountFailed, "cannot run fusermount3: \(String(cString: strerror(rc)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (status & 0x7f) == 0 && (status >> 8) & 0xff == 0 ? ExitCode.success.rawValue : ExitCode.mountFailed.rawValue
    }
}
