#if canImport(Glibc)
import Glibc
#endif

/// Background work that must not slow what the user is doing (issue "Fast
/// again": background work is invisible): `run` does `body` on a thread of
/// its own at SCHED_IDLE and the idle I/O class, and waits for it. A thread
/// of its own, made for the call: a thread given SCHED_IDLE may not be
/// allowed back to the normal policy without privilege, so no pooled
/// thread ever gets it. Where the policy is refused, nice 19 instead.
enum IdleThread {
    /// SCHED_IDLE and the ioprio_set(2) values, which the Glibc module does not export.
    private static let schedIdle: Int32 = 5
    private static let ioprioSet = 251              // x86_64's syscall number
    private static let ioprioWhoProcess: Int32 = 1   // with 0: the calling thread
    private static let ioprioIdle: Int32 = 3 << 13   // IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, 0)

    private final class Call: @unchecked Sendable {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    /// Lowers the calling thread to idle CPU and I/O priority (for good).
    static func lowerCallingThread() {
        var parameters = sched_param(sched_priority: 0)
        if sched_setscheduler(0, schedIdle, &parameters) != 0 {
            setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
        }
        #if arch(x86_64)
        _ = ioprioSyscall(ioprioSet, ioprioWhoProcess, 0, ioprioIdle)
        #endif
    }

    static func run<T>(_ body: () throws -> T) throws -> T {
        try withoutActuallyEscaping(body) { body in
            var result: Result<T, any Error>?
            let call = Call { result = Result { try body() } }
            var thread = pthread_t()
            let started = pthread_create(&thread, nil, { argument in
                let call = Unmanaged<Call>.fromOpaque(argument!).takeRetainedValue()
                IdleThread.lowerCallingThread()
                call.body()
                return nil
            }, Unmanaged.passRetained(call).toOpaque())
            guard started == 0 else {
                Unmanaged.passUnretained(call).release()
                // No thread to be had: here, at the caller's priority.
                return try body()
            }
            pthread_join(thread, nil)
            return try result!.get()
        }
    }
}

/// syscall(2) with three int arguments (the Glibc module does not export the
/// variadic one; glibc's x86_64 syscall() reads its arguments from registers
/// whatever the prototype).
@_silgen_name("syscall")
private func ioprioSyscall(_ number: Int, _ which: Int32, _ who: Int32, _ priority: Int32) -> Int
