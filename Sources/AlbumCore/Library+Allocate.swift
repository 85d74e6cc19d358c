#if canImport(Glibc)
import Glibc
#endif

/// fallocate(2), a _GNU_SOURCE function the Glibc module does not export
/// (posix_fallocate has no FALLOC_FL_KEEP_SIZE).
@_silgen_name("fallocate")
private func systemFallocate(_ fd: Int32, _ mode: Int32, _ offset: Int, _ length: Int) -> Int32

/// fallocate: the two modes ext4 users rely on (`posix_fallocate`, `rsync
/// --preallocate`, download managers, fio): 0, which allocates and grows the
/// file when the range passes its end, and FALLOC_FL_KEEP_SIZE, which only
/// allocates. Others (punching holes, zeroing, collapsing ranges) are
/// EOPNOTSUPP. The data changes, so it follows the write protocol: the asset
/// is marked as being written first, and a new size goes to the open file's
/// live state, committed at the flush or the last release like a write's.
extension Library {
    public static let keepSize: Int32 = 0x01   // FALLOC_FL_KEEP_SIZE

    public func allocate(_ file: OpenFile, mode: Int32, offset: Int64, length: Int64) throws(LibraryError) {
        guard mode == 0 || mode == Self.keepSize else { throw .notSupported }
        if isReadOnly { throw .readOnly }
        guard file.isWritable else { throw .notOpenForWriting }
        guard offset >= 0, length > 0 else { throw .invalidArgument }
        let (end, overflow) = offset.addingReportingOverflow(length)
        guard !overflow, end <= largestFileSize else { throw .fileTooLarge }
        waitForFreedData()
        _ = try changingData(file) { () throws(LibraryError) in
            try syscall { systemFallocate(file.descriptor, mode, Int(offset), Int(length)) }
        }
        if mode == 0 { wrote(file, endingAt: end) }
    }
}
