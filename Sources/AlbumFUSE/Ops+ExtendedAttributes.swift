import AlbumCore
import CFuse3
import Glibc

/// getxattr, listxattr, setxattr, removexattr, with the usual size probe:
/// a size of 0 asks how big the value is.
extension Operations {
    static func install(extendedAttributes ops: inout fuse_lowlevel_ops) {
        ops.getxattr = { req, ino, rawName, size in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                try Operations.replyValue(req, try fs.library.extendedAttribute(ino, name(rawName)), size: size)
            }
        }
        ops.listxattr = { req, ino, size in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                let list: [UInt8] = try fs.library.extendedAttributeNames(ino).flatMap { $0 + [0] }
                try Operations.replyValue(req, list, size: size)
            }
        }
        ops.setxattr = { req, ino, rawName, value, size, flags in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                let bytes = size == 0 ? [] : Array(UnsafeRawBufferPointer(start: value, count: size))
                let mode: Library.SetMode = flags & xattrCreate != 0 ? .createOnly
                    : flags & xattrReplace != 0 ? .replaceOnly : .createOrReplace
                if name(rawName) == Library.mergeAttribute {
                    fs.invalidator.beforeReply(try fs.library.mergeDuplicates(shownIn: ino, by: caller(req)).1)
                } else {
                    try fs.library.setExtendedAttribute(ino, name(rawName), bytes, mode: mode)
                }
                fuse_reply_err(req, 0)
            }
        }
        ops.removexattr = { req, ino, rawName in
            let fs = FileSystem.of(req)
            fs.replying(req) { () throws(LibraryError) in
                try fs.library.removeExtendedAttribute(ino, name(rawName))
                fuse_reply_err(req, 0)
            }
        }
    }

    /// Replies with the value, or its size when asked for 0 bytes; a buffer
    /// too small for it is `.rangeTooSmall` (ERANGE).
    private static func replyValue(_ req: fuse_req_t?, _ value: [UInt8], size: Int) throws(LibraryError) {
        if size == 0 {
            fuse_reply_xattr(req, value.count)
        } else if size < value.count {
            throw .rangeTooSmall
        } else {
            _ = value.withUnsafeBufferPointer { buf in
                buf.withMemoryRebound(to: CChar.self) { fuse_reply_buf(req, $0.baseAddress, value.count) }
            }
        }
    }
}

/// setxattr flags from <sys/xattr.h>, which the Glibc module does not export.
private let xattrCreate: Int32 = 1
private let xattrReplace: Int32 = 2
