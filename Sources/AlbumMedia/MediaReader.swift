#if canImport(Glibc)
import Glibc
#endif

/// Reads what a file says about itself. Pure: no store, no FUSE; safe to call
/// from several threads at once.
///
/// One pass hashes the whole file (1 MiB preads into libcrypto) and keeps the
/// first MiB; libmagic names the type from its first 64 KiB; then one reader,
/// chosen by the file's own signature (not its name), reads headers with
/// bounded preads: JPEG segments and PNG chunks (libexif for their EXIF),
/// HEIF through libheif, QuickTime/MP4 boxes, TIFF IFDs for camera raw.
///
/// Hostile input: every length in the file is checked against what is
/// there; walks are capped in depth, count and bytes; reads never go past
/// the size the file had when it was opened. A broken file yields fewer
/// facts. Only a failing system call (EIO …) throws.
public enum MediaReader {
    public static func read(path: String) throws -> MediaFacts {
        let fd = try openForReading(path)
        defer { close(fd) }
        return try read(fileDescriptor: fd)
    }

    /// Reads with pread only: the descriptor's offset is not moved, and it is
    /// not closed. The descriptor must be a regular file (else EINVAL).
    public static func read(fileDescriptor fd: Int32) throws -> MediaFacts {
        var input = try FileInput(fileDescriptor: fd)
        let hash = try input.hashAll(keepingPrefix: true)
        var facts = MediaFacts(sha256: hash.sha256, byteCount: hash.count)
        let prefix = Bytes(input.prefix)
        facts.type = MimeSniffer.type(of: input.prefix[...])
        try readMetadata(input, prefix: prefix, into: &facts)
        facts.kind = kind(of: facts)
        return facts
    }

    /// The SHA-256 alone, as 64 lowercase hex digits (for `fsck --verify`).
    public static func hashOnly(fileDescriptor fd: Int32) throws -> String {
        var input = try FileInput(fileDescriptor: fd)
        return try input.hashAll(keepingPrefix: false).sha256
    }

    public static func hashOnly(path: String) throws -> String {
        let fd = try openForReading(path)
        defer { close(fd) }
        return try hashOnly(fileDescriptor: fd)
    }

    // MARK: - Dispatch by signature

    static func readMetadata(_ input: FileInput, prefix: Bytes, into facts: inout MediaFacts) throws(MediaReadError) {
        if prefix.starts(with: [0xFF, 0xD8, 0xFF]) {
            apply(try JPEGReader.read(input), to: &facts)
        } else if prefix.starts(with: PNGReader.signature) {
            apply(try PNGReader.read(input), to: &facts)
        } else if let brands = FileTypeBox(prefix) {
            if brands.isCanonRaw {
                facts.isRaw = true
                if facts.type == nil || facts.type == "application/octet-stream" { facts.type = "image/x-canon-cr3" }
            } else if brands.isStillImage {
                apply(try HEIFReader.read(input), to: &facts)
            } else {
                apply(try MovieReader.read(input), to: &facts)
            }
        } else if ["moov", "mdat", "wide", "free", "skip", "pnot"].contains(prefix.fourCC(4) ?? "") {
            apply(try MovieReader.read(input), to: &facts)  // QuickTime without ftyp
        } else if prefix.starts(with: Array("FUJIFILMCCD-RAW".utf8)) {
            facts.isRaw = true
            // RAF: a big-endian offset and length of the embedded JPEG at 84.
            if let offset = prefix.u32(84), offset > 0, Int64(offset) < input.size {
                let embedded = try input.read(at: Int64(offset), count: 3)
                if embedded.starts(with: [0xFF, 0xD8, 0xFF]) {
                    let jpeg = try JPEGReader.read(input, from: Int64(offset))
                    apply(StillFacts(exif: jpeg.exif), to: &facts)
                }
            }
        } else if TIFFReader.isTIFF(prefix) {
            let tiff = try TIFFReader.read(input, prefix: prefix)
            facts.isRaw = tiff.isRaw
            if tiff.isRaw, facts.type == "image/tiff" || facts.type == nil, let refined = TIFFReader.rawType(tiff) {
                facts.type = refined
            }
            // libexif reads the TIFF's EXIF from the first 64 KiB.
            var still = StillFacts(width: tiff.width, height: tiff.height)
            still.exif = ExifReader.read(Array(prefix.storage.prefix(64 * 1024))[...])
            apply(still, to: &facts)
        }
    }

    /// The container's own size wins over EXIF's PixelX/YDimension (which
    /// editors often leave stale).
    private static func apply(_ still: StillFacts, to facts: inout MediaFacts) {
        facts.width = still.width ?? still.exif?.width
        facts.height = still.width == nil ? still.exif?.height : still.height
        facts.captured = still.exif?.captured
        facts.location = still.exif?.location
        facts.contentIdentifier = still.exif?.contentIdentifier
        facts.isScreenshot = still.exif?.isScreenshot == true || still.xmpScreenshot
    }

    private static func apply(_ movie: MovieReader.Facts, to facts: inout MediaFacts) {
        facts.captured = movie.captured
        facts.duration = movie.duration
        facts.width = movie.width
        facts.height = movie.height
        facts.location = movie.location
        facts.contentIdentifier = movie.contentIdentifier
    }

    static func kind(of facts: MediaFacts) -> MediaKind {
        if facts.isRaw { return .photo }
        guard let type = facts.type else { return .other }
        if type.hasPrefix("image/") { return .photo }
        if type.hasPrefix("video/") { return .video }
        if type.hasPrefix("audio/") { return .audio }
        return .other
    }

    public static func openForReading(_ path: String) throws(MediaReadError) -> Int32 {
        // O_NONBLOCK: opening a FIFO must not wait for a writer (it is then
        // refused as not a regular file).
        try syscall("open") { open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK) }
    }
}
