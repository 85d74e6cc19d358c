import Glibc

// A child started from a test runner can inherit blocked termination signals
// and then never stop: unblock them before anything else.
var unblocked = sigset_t()
sigemptyset(&unblocked)
for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&unblocked, signal) }
sigprocmask(SIG_UNBLOCK, &unblocked, nil)

let status = CommandLineInterface.run(Array(CommandLine.arguments.dropFirst()))
// Everything is closed and flushed by now; _exit runs no exit handlers, so a
// download's thread still in libcurl or libcrypto (a stalled one the end of
// the mount did not wait for) cannot crash against libcrypto's teardown.
fflush(nil)
_exit(status)
