import AlbumCore
import CFuse3

/// The low-level operations table. Built in a function (a global table would
/// be shared mutable state); fuse_session_new copies it.
enum Operations {
    static func table() -> fuse_lowlevel_ops {
        var ops = fuse_lowlevel_ops()
        ops.`init` = { _, conn in
            guard let conn else { return }
            // Take the big requests the kernel offers; never raise max_write above
            // what libfuse proposes (that kills the session silently).
            conn.pointee.want |= UInt32(FUSE_CAP_ASYNC_READ)
            // Data moves by splice where the kernel allows: reads from the
            // content file to the kernel, writes from the kernel's pipe into
            // the content file.
            conn.pointee.want |= conn.pointee.capable
                & UInt32(FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE | FUSE_CAP_SPLICE_READ)
        }
        install(nodes: &ops)
        install(directories: &ops)
        install(files: &ops)
        install(extendedAttributes: &ops)
        return ops
    }
}
