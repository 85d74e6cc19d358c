#if canImport(Glibc)
import Glibc
#endif
import CZstd

/// What went wrong compressing or decompressing: one line.
public struct ZstdError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// Whole files through libzstd's streaming API, descriptor to descriptor
/// (read and written from their current offsets), in 1 MiB pieces: nothing
/// is held in memory whole. A compressed file carries zstd's checksum of its
/// content, so a damaged one fails to decompress instead of giving other bytes.
public enum Zstd {
    /// Compresses all of `source` into `destination` at `level` (3: zstd's default).
    public static func compress(_ source: Int32, into destination: Int32, level: Int32 = 3) throws {
        let writer = try Writer(destination, level: level)
        var input = [UInt8](repeating: 0, count: ZSTD_CStreamInSize())
        while true {
            let got = try readSome(source, into: &input)
            if got == 0 { break }
            try input.withUnsafeBytes { try writer.write(UnsafeRawBufferPointer(rebasing: $0[..<got])) }
        }
        try writer.finish()
    }

    /// A zstd stream written piece by piece into a descriptor (from its
    /// current offset): what is given to `write` is compressed as it comes,
    /// and `finish` ends the frame (with its checksum). Nothing is kept whole.
    public final class Writer {
        private let stream: OpaquePointer
        private let destination: Int32
        private var output: [UInt8]

        public init(_ destination: Int32, level: Int32 = 3) throws {
            guard let stream = ZSTD_createCCtx() else { throw ZstdError("zstd: out of memory") }
            self.stream = stream
            self.destination = destination
            output = [UInt8](repeating: 0, count: ZSTD_CStreamOutSize())
            try check(ZSTD_CCtx_setParameter(stream, ZSTD_c_compressionLevel, level))
            try check(ZSTD_CCtx_setParameter(stream, ZSTD_c_checksumFlag, 1))
        }

        deinit { ZSTD_freeCCtx(stream) }

        public func write(_ bytes: UnsafeRawBufferPointer) throws {
            var input = ZSTD_inBuffer(src: bytes.baseAddress, size: bytes.count, pos: 0)
            while input.pos < input.size {
                _ = try step(&input, ZSTD_e_continue)
            }
        }

        /// Ends the stream: everything given is in the descriptor.
        public func finish() throws {
            var input = ZSTD_inBuffer(src: nil, size: 0, pos: 0)
            while try step(&input, ZSTD_e_end) != 0 {}
        }

        /// One call of the compressor, its output written; what it has left to flush.
        private func step(_ input: inout ZSTD_inBuffer, _ mode: ZSTD_EndDirective) throws -> Int {
            let (remaining, produced) = try output.withUnsafeMutableBytes { (outBytes) throws -> (Int, Int) in
                var outBuffer = ZSTD_outBuffer(dst: outBytes.baseAddress, size: outBytes.count, pos: 0)
                let remaining = try check(ZSTD_compressStream2(stream, &outBuffer, &input, mode))
                return (remaining, outBuffer.pos)
            }
            try writeAll(destination, output, count: produced)
            return remaining
        }
    }

    /// Decompresses all of `source` into `destination`; a file that is not
    /// one whole zstd stream (cut short, damaged, another format) is an error.
    public static func decompress(_ source: Int32, into destination: Int32) throws {
        let reader = try Reader(source)
        var output = [UInt8](repeating: 0, count: ZSTD_DStreamOutSize())
        while true {
            let got = try output.withUnsafeMutableBytes { try reader.read(into: $0) }
            if got == 0 { return }
            try writeAll(destination, output, count: got)
        }
    }

    /// A zstd stream read piece by piece from a descriptor (from its current
    /// offset), decompressed as it is asked for: nothing is kept whole. Its
    /// end is `read` giving 0; a stream cut short or damaged is an error there.
    public final class Reader {
        private let stream: OpaquePointer
        private let source: Int32
        private var input: [UInt8]
        private var at = 0, end = 0
        private var sourceEnded = false, sawInput = false, frameOpen = false, flushPending = false

        public init(_ source: Int32) throws {
            guard let stream = ZSTD_createDCtx() else { throw ZstdError("zstd: out of memory") }
            self.stream = stream
            self.source = source
            input = [UInt8](repeating: 0, count: ZSTD_DStreamInSize())
        }

        deinit { ZSTD_freeDCtx(stream) }

        /// Fills the front of `buffer` with what comes next; how many bytes (0: the end).
        public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
            guard buffer.count > 0 else { return 0 }
            while true {
                if at == end && !sourceEnded {
                    end = try readSome(source, into: &input)
                    at = 0
                    sourceEnded = end == 0
                    sawInput = sawInput || end > 0
                }
                // All read and all given out: the end, if the frame was whole.
                if at == end && sourceEnded && !flushPending {
                    guard sawInput, !frameOpen else { throw ZstdError("zstd: the compressed file is cut short") }
                    return 0
                }
                let before = at
                let (produced, remaining) = try input.withUnsafeBytes { (inBytes) throws -> (Int, Int) in
                    var inBuffer = ZSTD_inBuffer(src: inBytes.baseAddress, size: end, pos: at)
                    var outBuffer = ZSTD_outBuffer(dst: buffer.baseAddress, size: buffer.count, pos: 0)
                    let remaining = try check(ZSTD_decompressStream(stream, &outBuffer, &inBuffer))
                    at = inBuffer.pos
                    return (outBuffer.pos, remaining)
                }
                // (A call that moved nothing says nothing of the frame: after
                // a whole one, zstd's answer is the next frame's header size.)
                if produced > 0 || at > before { frameOpen = remaining != 0 }
                // A full buffer: zstd may hold more to give out.
                flushPending = produced == buffer.count
                if produced > 0 { return produced }
            }
        }
    }

    @discardableResult
    fileprivate static func check(_ code: Int) throws -> Int {
        if ZSTD_isError(code) != 0 { throw ZstdError("zstd: \(String(cString: ZSTD_getErrorName(code)))") }
        return code
    }

    fileprivate static func readSome(_ descriptor: Int32, into buffer: inout [UInt8]) throws -> Int {
        while true {
            let got = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if got >= 0 { return got }
            if errno != EINTR { throw ZstdError("reading: \(String(cString: strerror(errno)))") }
        }
    }

    fileprivate static func writeAll(_ descriptor: Int32, _ buffer: [UInt8], count: Int) throws {
        var done = 0
        while done < count {
            let wrote = buffer.withUnsafeBytes { write(descriptor, $0.baseAddress! + done, count - done) }
            if wrote < 0 && errno == EINTR { continue }
            guard wrote > 0 else { throw ZstdError("writing: \(wrote < 0 ? String(cString: strerror(errno)) : "nothing written")") }
            done += wrote
        }
    }
}
