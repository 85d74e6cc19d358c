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
            // libfuse splices each request into a pipe of max_write + 4 KiB,
            // and the kernel caps pipes at fs.pipe-max-size (1 MiB here): with
            // the 1 MiB max_write it proposes, every request falls back to a
            // copy. One page less lets the data go from the kernel's pipe into
            // the content file without passing through our memory. (Lowering
            // max_write is safe; raising it kills the session.)
            if let pipeLimit = PipeLimit.current, pipeLimit > 4096 {
                conn.pointee.max_write = min(conn.pointee.max_write, UInt32(pipeLimit - 4096))
            }
        }
        install(nodes: &ops)
        install(directories: &ops)
        install(files: &ops)
        install(extendedAttributes: &ops)
        return ops
    }
}
