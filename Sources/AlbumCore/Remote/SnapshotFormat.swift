#if canImport(Glibc)
import Glibc
#endif
import SQLiteKit

/// The bytes of a snapshot of the metadata (SEMANTICS.md § Surviving the
/// machine), before zstd: the database's rows, not its pages. A page copy
/// is the whole database written to disk and read back (328 MB for
/// 1,000,000 assets), and a `cp -r … && sync` running meanwhile waited for
/// the kernel to write it (1.46 × its time); the rows are compressed as
/// they are read and only the compressed stream is written (31 MiB), and the
/// indexes are built at recovery, not at every snapshot.
///
///     "albumfs snapshot 1\n"
///     schema  (1)  type, name, sql          every table and index, tables first
///     table   (2)  name, column count       then its rows:
///     row     (3)  one value a column       …
///     end of table (4)
///     user_version (5)  int64
///     end     (255)
///
/// A value is a tag (0 null, 1 integer: 8 bytes, 2 real: 8 bytes, 3 text
/// and 4 blob: a length then the bytes); strings and lengths are unsigned
/// LEB128 lengths then bytes; integers little-endian.
enum SnapshotFormat {
    static let magic = Array("albumfs snapshot 1\n".utf8)

    enum Record: UInt8 {
        case schema = 1, table = 2, row = 3, tableEnd = 4, userVersion = 5, end = 255
    }

    enum ValueTag: UInt8 {
        case null = 0, integer = 1, real = 2, text = 3, blob = 4
    }

    struct Corrupt: Error, CustomStringConvertible {
        let description: String
    }
}

/// Writes the format into `sink` in pieces of about 1 MiB.
struct SnapshotEncoder {
    private var buffer: [UInt8] = []
    private let sink: (UnsafeRawBufferPointer) throws -> Void

    init(sink: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        self.sink = sink
        buffer.reserveCapacity(1 << 20 + 4096)
        buffer += SnapshotFormat.magic
    }

    mutating func record(_ record: SnapshotFormat.Record) throws {
        buffer.append(record.rawValue)
        if buffer.count >= 1 << 20 { try flush() }
    }

    mutating func string(_ bytes: some Collection<UInt8>) {
        unsigned(UInt64(bytes.count))
        buffer += bytes
    }

    mutating func unsigned(_ value: UInt64) {
        var value = value
        repeat {
            let low = UInt8(value & 0x7F)
            value >>= 7
            buffer.append(value == 0 ? low : low | 0x80)
        } while value != 0
    }

    mutating func int64(_ value: Int64) {
        withUnsafeBytes(of: value.littleEndian) { buffer += $0 }
    }

    mutating func value(_ value: ColumnValue) {
        switch value {
        case .null: buffer.append(SnapshotFormat.ValueTag.null.rawValue)
        case .integer(let v): buffer.append(SnapshotFormat.ValueTag.integer.rawValue); int64(v)
        case .real(let v): buffer.append(SnapshotFormat.ValueTag.real.rawValue); int64(Int64(bitPattern: v.bitPattern))
        case .text(let bytes): buffer.append(SnapshotFormat.ValueTag.text.rawValue); string(bytes)
        case .blob(let bytes): buffer.append(SnapshotFormat.ValueTag.blob.rawValue); string(bytes)
        }
    }

    /// Ends the stream: the end record, everything handed to the sink.
    mutating func finish() throws {
        try record(.end)
        try flush()
    }

    private mutating func flush() throws {
        try buffer.withUnsafeBytes { try sink($0) }
        buffer.removeAll(keepingCapacity: true)
    }
}

/// Reads the format from a source of bytes (a decompressing `Zstd.Reader`,
/// a file), buffered; a stream cut short or not in the format is
/// `SnapshotFormat.Corrupt`.
struct SnapshotDecoder {
    /// Fills the front of a buffer; how many bytes (0: the end).
    private let source: (UnsafeMutableRawBufferPointer) throws -> Int
    private var buffer = [UInt8](repeating: 0, count: 1 << 20)
    private var at = 0, end = 0

    /// Reads from `source`; nil if it does not start with the magic.
    init?(reading source: @escaping (UnsafeMutableRawBufferPointer) throws -> Int) throws {
        self.source = source
        guard try bytes(SnapshotFormat.magic.count) == SnapshotFormat.magic else { return nil }
    }

    /// Reads from `descriptor` at its offset; nil if it does not start with the magic.
    init?(_ descriptor: Int32) throws {
        try self.init(reading: { buffer in
            let got = read(descriptor, buffer.baseAddress, buffer.count)
            guard got >= 0 else { throw LibraryError(errno: errno) }
            return got
        })
    }

    mutating func record() throws -> SnapshotFormat.Record {
        let byte = try self.byte()
        guard let record = SnapshotFormat.Record(rawValue: byte) else { throw SnapshotFormat.Corrupt(description: "unknown record \(byte)") }
        return record
    }

    mutating func string() throws -> [UInt8] {
        try bytes(Int(try unsigned()))
    }

    mutating func text() throws -> String {
        String(decoding: try string(), as: UTF8.self)
    }

    mutating func unsigned() throws -> UInt64 {
        var value: UInt64 = 0, shift: UInt64 = 0
        while true {
            let byte = try self.byte()
            guard shift < 64 else { throw SnapshotFormat.Corrupt(description: "a length too long") }
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
    }

    mutating func int64() throws -> Int64 {
        let raw = try bytes(8)
        return raw.reversed().reduce(Int64(0)) { $0 << 8 | Int64($1) }
    }

    mutating func value() throws -> ColumnValue {
        let byte = try self.byte()
        switch SnapshotFormat.ValueTag(rawValue: byte) {
        case .null: return .null
        case .integer: return .integer(try int64())
        case .real: return .real(Double(bitPattern: UInt64(bitPattern: try int64())))
        case .text: return .text(try string())
        case .blob: return .blob(try string())
        case nil: throw SnapshotFormat.Corrupt(description: "unknown value tag \(byte)")
        }
    }

    /// After the end record: nothing follows, and the source says it has
    /// ended (a `Zstd.Reader` checks the frame's checksum there: a snapshot
    /// whose rows all parse is still refused if it is not what was written).
    mutating func finish() throws {
        guard at == end, try buffer.withUnsafeMutableBytes({ try source($0) }) == 0 else {
            throw SnapshotFormat.Corrupt(description: "bytes after the snapshot's end")
        }
    }

    private mutating func byte() throws -> UInt8 {
        if at == end { try refill() }
        defer { at += 1 }
        return buffer[at]
    }

    private mutating func bytes(_ count: Int) throws -> [UInt8] {
        guard count <= 1 << 31 else { throw SnapshotFormat.Corrupt(description: "a value of \(count) bytes") }
        var out: [UInt8] = []
        out.reserveCapacity(min(count, 1 << 20))   // (a length is not trusted before its bytes came)
        while out.count < count {
            if at == end { try refill() }
            let take = min(count - out.count, end - at)
            out += buffer[at..<(at + take)]
            at += take
        }
        return out
    }

    private mutating func refill() throws {
        let got = try buffer.withUnsafeMutableBytes { try source($0) }
        guard got > 0 else { throw SnapshotFormat.Corrupt(description: "the snapshot is cut short") }
        at = 0
        end = got
    }
}
