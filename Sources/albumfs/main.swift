import Glibc

// A child started from a test runner can inherit blocked termination signals
// and then never stop: unblock them before anything else.
var unblocked = sigset_t()
sigemptyset(&unblocked)
for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&unblocked, signal) }
sigprocmask(SIG_UNBLOCK, &unblocked, nil)

exit(CommandLineInterface.run(Array(CommandLine.arguments.dropFirst())))
