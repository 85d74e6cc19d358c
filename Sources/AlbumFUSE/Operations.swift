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
            // No splice: with passthrough (Passthrough.swift) file data never
            // reaches the daemon; without it, splicing write requests in needs
            // max_write a page under fs.pipe-max-size (1 MiB here) and, measured,
            // gained nothing for writes while every small request paid a splice
            // and a read (W5 random reads: 0.48 of plain IOPS against 0.60).
            // libfuse turns splice reads on by default where it can.
            conn.pointee.want &= ~UInt32(FUSE_CAP_SPLICE_READ)
            // Every listing is a READDIRPLUS, so it leaves each name in the
            // kernel with its attributes. With libfuse's default (adaptive)
            // the kernel asks for that only for a listing's first page or
            // after a lookup, and a listing served from its cache brings no
            // names at all: `ls` then `ls -l` of a 100,000-photo roll sent
            // 100,000 LOOKUPs (6.6-8.3 s against 0.33 s), and Empty Trash, or
            // `rm` of what `ls` or a glob listed, one LOOKUP per name. A cold
            // names-only `ls` of that roll pays for it: 0.62 s against 0.35.
            conn.pointee.want &= ~UInt32(FUSE_CAP_READDIRPLUS_AUTO)
        }
        install(nodes: &ops)
        install(directories: &ops)
        install(files: &ops)
        install(extendedAttributes: &ops)
        return ops
    }
}
