/// A small, bounded reader of ISO base media file format boxes (QuickTime
/// MOV, MP4, HEIF, CR3), written by hand because no well-kept C library on
/// Debian reads MOV metadata without decoding (libheif reads HEIF images
/// only; ffmpeg's libavformat is a whole demuxer).
///
/// It reads box headers with pread and never the media data: `moov` after
/// `mdat` costs one header read to skip. A box that claims more bytes than
/// its parent has is cut at the parent's end (a truncated file still yields
/// what is there); a size smaller than its header ends that level (it could
/// only loop). `size == 1` takes the 64-bit size, `size == 0` runs to the
/// end of the parent. Depth, box count and leaf sizes are capped.
struct BoxReader {
    struct Box {
        var type: String
        /// The type as a number: `ilst` items are named by a key index.
        var code: UInt32
        /// Where the box starts and where its payload starts and ends.
        var start: Int64
        var payload: Int64
        var end: Int64
        /// The box claimed more bytes than its parent (or the file) has.
        /// A cut container is still walked; a cut leaf is not read.
        var isCut: Bool
    }

    static let maximumDepth = 8
    static let maximumBoxes = 10_000

    let input: FileInput
    private(set) var visited = 0

    init(_ input: FileInput) { self.input = input }

    /// The boxes directly inside `start..<end`, in order.
    mutating func children(from start: Int64, to end: Int64) throws(MediaReadError) -> [Box] {
        var boxes: [Box] = []
        var offset = start
        while offset + 8 <= end, visited < Self.maximumBoxes {
            visited += 1
            let header = Bytes(try input.read(at: offset, count: 16))
            guard let size32 = header.u32(0), let code = header.u32(4), let type = header.fourCC(4) else { break }
            var headerSize: Int64 = 8
            var size = Int64(size32)
            if size32 == 1 {
                guard let size64 = header.u64(8) else { break }
                headerSize = 16
                size = size64 > UInt64(Int64.max) ? Int64.max : Int64(size64)
            } else if size32 == 0 {
                size = end - offset
            }
            guard size >= headerSize else { break }
            let isCut = size > end - offset
            let boxEnd = isCut ? end : offset + size
            boxes.append(Box(type: type, code: code, start: offset, payload: offset + headerSize, end: boxEnd, isCut: isCut))
            offset = boxEnd
        }
        return boxes
    }

    /// A leaf box's payload; nil when it is cut short or larger than `limit`.
    func payload(of box: Box, limit: Int) throws(MediaReadError) -> Bytes? {
        let length = box.end - box.payload
        guard !box.isCut, length >= 0, length <= Int64(limit) else { return nil }
        let bytes = try input.read(at: box.payload, count: Int(length))
        return bytes.count == Int(length) ? Bytes(bytes) : nil
    }
}

/// `ftyp`: the major brand and the compatible brands, from the first bytes.
struct FileTypeBox {
    var major: String
    var compatible: [String]

    init?(_ prefix: Bytes) {
        guard prefix.fourCC(4) == "ftyp", let size = prefix.u32(0), size >= 16,
              let major = prefix.fourCC(8) else { return nil }
        self.major = major
        var brands: [String] = []
        var at = 16
        while at + 4 <= Int(min(size, 4096)), let brand = prefix.fourCC(at) {
            brands.append(brand)
            at += 4
        }
        compatible = brands
    }

    var brands: [String] { [major] + compatible }

    static let stillBrands: Set<String> = ["heic", "heix", "heim", "heis", "mif1", "mif2", "miaf", "avif", "avci", "heif"]
    static let movieBrands: Set<String> = ["qt  ", "isom", "iso2", "mp41", "mp42", "M4V ", "M4A ", "3gp4", "3gp5", "3g2a",
                                           "avc1", "msf1", "hevc", "hevx", "avis", "crx "]

    /// A still image: HEIF, HEIC, AVIF (read with libheif). An image
    /// sequence or a movie that also lists a still brand is a movie.
    var isStillImage: Bool {
        if Self.stillBrands.contains(major) { return true }
        if Self.movieBrands.contains(major) { return false }
        return compatible.contains(where: Self.stillBrands.contains) && !compatible.contains(where: Self.movieBrands.contains)
    }

    /// Canon's CR3 raw.
    var isCanonRaw: Bool { major == "crx " }
}
