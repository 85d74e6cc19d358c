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
            // Reads are answered by splicing from the content file. Not asked
            // for: splice *reads* of requests. libfuse splices each request
            // into a pipe of max_write + 4 KiB, which needs max_write a page
            // under fs.pipe-max-size (1 MiB here); measured with that, writes
            // gained nothing clear while every small request paid a splice and
            // a read instead of one read (W5 random reads: 0.48 of plain IOPS
            // against 0.60 without).
            conn.pointee.want |= conn.pointee.capable & UInt32(FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE)
        }
        install(nodes: &ops)
        install(directories: &ops)
        install(files: &ops)
        install(extendedAttributes: &ops)
        return ops
    }
}
