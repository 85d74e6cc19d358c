import AlbumCore
import Glibc

/// An unmounted store mounted for one command on a private temporary
/// directory (mode 0700, under $XDG_RUNTIME_DIR or /tmp), by this same
/// binary (`albumfs mount --store DIR TMPDIR`), and unmounted by
/// `unmount()` (`albumfs unmount TMPDIR`, which waits until the daemon let
/// go of the store), which the caller must always reach. Signals are held
/// back while either runs, so that Ctrl-C never leaves a daemon half
/// started or a mount behind; they take effect right after.
struct PrivateMount {
    let point: String

    static func mount(store: String?) throws(CommandFailure) -> PrivateMount {
        let base = getenv("XDG_RUNTIME_DIR").map { String(cString: $0) }.flatMap { isDirectory($0) ? $0 : nil } ?? "/tmp"
        var template = Array((base + "/albumfs-import-XXXXXX").utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw CommandFailure(.mountFailed, "cannot make a temporary mount point in \(base): \(String(cString: strerror(errno)))")
        }
        let point = String(decoding: template.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        do {
            let arguments = (store.map { ["--store", $0] } ?? []) + [point]
            _ = try Interruption.deferred { () throws(CommandFailure) in
                try MountCommand(parsing: arguments, storeAsArgument: false).run()
            }
        } catch {
            rmdir(point)
            throw error
        }
        return PrivateMount(point: point)
    }

    /// Unmounts and removes the directory; a failure is reported, not thrown.
    func unmount() {
        let status = Interruption.deferred { () -> Int32 in
            do throws(CommandFailure) {
                return try UnmountCommand(parsing: [point]).run()
            } catch {
                toStandardError("albumfs: \(error.message)\n")
                return error.code.rawValue
            }
        }
        if status == ExitCode.success.rawValue {
            rmdir(point)
        } else {
            toStandardError("albumfs: could not unmount the import's private mount \(point): run albumfs unmount \(point)\n")
        }
    }

    private static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }
}
