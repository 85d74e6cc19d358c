import Glibc

/// A path as the bytes the kernel takes: names from an old archive or a
/// camera card need not be UTF-8, and are opened and copied byte for byte.
struct BytePath: Hashable, Sendable, CustomStringConvertible {
    var bytes: [UInt8]

    init(_ string: String) { bytes = Array(string.utf8) }
    init(bytes: [UInt8]) { self.bytes = bytes }

    func appending(_ name: [UInt8]) -> BytePath {
        BytePath(bytes: bytes.last == UInt8(ascii: "/") ? bytes + name : bytes + [UInt8(ascii: "/")] + name)
    }

    func appending(_ name: String) -> BytePath { appending(Array(name.utf8)) }

    /// The last component.
    var name: [UInt8] { Array(bytes.split(separator: UInt8(ascii: "/")).last ?? []) }

    /// For messages: invalid UTF-8 shown as U+FFFD.
    var description: String { String(decoding: bytes, as: UTF8.self) }

    func withCString<R>(_ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        try (bytes + [0]).withUnsafeBufferPointer { buffer in
            try buffer.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
        }
    }

    /// The names in a directory (not `.` and `..`), or the errno of opendir.
    func directoryEntries() -> Result<[[UInt8]], SystemError> {
        guard let directory = withCString({ opendir($0) }) else { return .failure(SystemError("opendir")) }
        defer { closedir(directory) }
        var names: [[UInt8]] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix(while: { $0 != 0 })) }
            if name != [UInt8(ascii: ".")] && name != [UInt8(ascii: "."), UInt8(ascii: ".")] { names.append(name) }
        }
        return .success(names)
    }

    func status(followingLinks: Bool = false) -> stat? {
        var info = stat()
        let rc = withCString { followingLinks ? stat($0, &info) : lstat($0, &info) }
        return rc == 0 ? info : nil
    }

    /// A `user.*` extended attribute as text; nil when absent (or unreadable).
    func extendedAttribute(_ name: String) -> String? {
        extendedAttributeBytes(name).map { String(decoding: $0, as: UTF8.self) }
    }

    /// A `user.*` extended attribute's value, whatever its size; nil when
    /// absent (or unreadable).
    /// `capacity`: the first buffer's size (an attribute whose read acts,
    /// as `user.albumfs.refresh` does, is read once with the largest).
    func extendedAttributeBytes(_ name: String, capacity: Int = 256) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: capacity)
        while true {
            let count = withCString { path in systemGetxattr(path, name, &buffer, buffer.count) }
            if count >= 0 { return Array(buffer[..<count]) }
            guard errno == ERANGE else { return nil }
            let needed = withCString { path in systemGetxattr(path, name, nil, 0) }
            guard needed > buffer.count else { return nil }
            buffer = [UInt8](repeating: 0, count: needed)
        }
    }
}

/// A failed system call: which, and its errno.
struct SystemError: Error, CustomStringConvertible {
    let operation: String
    let code: Int32
    init(_ operation: String, _ code: Int32 = errno) {
        self.operation = operation
        self.code = code
    }
    var description: String { "\(operation): \(String(cString: strerror(code)))" }
}

/// getxattr(2) and renameat2(2), which the Glibc module does not export.
@_silgen_name("getxattr")
private func systemGetxattr(_ path: UnsafePointer<CChar>, _ name: UnsafePointer<CChar>, _ value: UnsafeMutableRawPointer?,
                            _ size: Int) -> Int
@_silgen_name("renameat2")
func systemRenameat2(_ oldDirectory: Int32, _ oldPath: UnsafePointer<CChar>, _ newDirectory: Int32,
                     _ newPath: UnsafePointer<CChar>, _ flags: UInt32) -> Int32
/// renameat2's flag: fail with EEXIST rather than replace the target.
let renameNoReplace: UInt32 = 1
