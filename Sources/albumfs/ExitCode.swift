/// The exit statuses of `albumfs`, documented in docs/GUIDE.md ("Commands") and the man page.
enum ExitCode: Int32 {
    case success = 0
    /// fsck found problems; any other command failed while running.
    case problemsFound = 1
    /// Bad usage: unknown command or option, missing argument.
    case usage = 2
    /// The store cannot be used: locked by another mount, corrupt, newer format, …
    case unusableStore = 3
    /// The mount point is missing or mounting failed.
    case mountFailed = 4
}

/// A failure a command reports in one line and turns into an exit status.
struct CommandFailure: Error {
    let code: ExitCode
    let message: String
    init(_ code: ExitCode, _ message: String) {
        self.code = code
        self.message = message
    }
}
