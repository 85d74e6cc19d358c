import Foundation
import Testing
@testable import AlbumMedia

/// Broken and hostile files: never a crash, never a hang, only fewer facts.
@Suite("MediaReader on truncated and hostile input", .timeLimit(.minutes(2)))
struct HostileInputTests {
    /// A file in a temporary directory, removed at the end.
    final class Scratch {
        let path = NSTemporaryDirectory() + "albumfs-hostile-\(getpid())-\(UUID().uuidString)"
        func write(_ bytes: [UInt8]) throws -> String {
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return path
        }
        deinit { unlink(path) }
    }

    /// Every fact of `part` is absent or the same as in `whole`: a cut file
    /// may lose facts, never invent others.
    static func expectSubset(_ part: MediaFacts, of whole: MediaFacts, _ note: String) {
        func check<T: Equatable>(_ a: T?, _ b: T?, _ field: String) {
            if let a { #expect(a == b, "\(note): \(field) \(a) not in the whole file's \(String(describing: b))") }
        }
        // A cut file may lose the offset (EXIF OffsetTimeOriginal) or Apple's
        // local creation date (then mvhd's UTC time shows): the same moment.
        if let a = part.captured, let b = whole.captured, a != b {
            #expect(b.hasPrefix(a) || sameInstant(a, b), "\(note): captured \(a) is not \(b)")
        }
        check(part.width, whole.width, "width")
        check(part.height, whole.height, "height")
        check(part.duration, whole.duration, "duration")
        check(part.location, whole.location, "location")
        check(part.contentIdentifier, whole.contentIdentifier, "contentIdentifier")
        if part.isScreenshot { #expect(whole.isScreenshot, "\(note): isScreenshot") }
    }

    /// `2019-07-14T07:30:00Z` and `2019-07-14T09:30:00+02:00` are one moment.
    static func sameInstant(_ a: String, _ b: String) -> Bool {
        func seconds(_ text: String) -> Int? {
            let f = ISO8601DateFormatter()
            return f.date(from: text).map { Int($0.timeIntervalSince1970) }
        }
        guard let x = seconds(a), let y = seconds(b) else { return false }
        return x == y
    }

    @Test("truncated at many cut points: fewer facts, the hash of what is there",
          arguments: ["live.jpg", "live.mov", "clip.mp4", "photo.heic", "live2.heic", "raw.dng", "screenshot.png", "screenshot-xmp.png", "sound.m4a"])
    func truncated(name: String) throws {
        let media = try MediaFixtures.get()
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: media.directory + "/" + name)))
        let whole = try MediaReader.read(path: media.directory + "/" + name)
        let scratch = Scratch()
        // Every byte of the first and last 600 (headers and a trailing moov
        // live there), and 150 cuts spread over the rest.
        var cuts = Array(0..<min(600, bytes.count)) + Array(max(0, bytes.count - 600)..<bytes.count)
        cuts += stride(from: 600, to: bytes.count, by: max(1, bytes.count / 150))
        for cut in cuts where cut < bytes.count {
            let part = try MediaReader.read(path: try scratch.write(Array(bytes[..<cut])))
            #expect(part.byteCount == Int64(cut))
            Self.expectSubset(part, of: whole, "\(name) cut at \(cut)")
        }
    }

    @Test("a 4 GiB sparse file hashes in full, within the time limit")
    func sparseFourGiB() throws {
        let scratch = Scratch()
        let fd = open(scratch.path, O_CREAT | O_RDWR | O_TRUNC, 0o600)
        try #require(fd >= 0)
        defer { close(fd) }
        try #require(ftruncate(fd, 4 << 30) == 0)
        let start = ContinuousClock.now
        let facts = try MediaReader.read(fileDescriptor: fd)
        let elapsed = ContinuousClock.now - start
        // What sha256sum says of `truncate -s 4G` (computed once with coreutils: 32 s here).
        #expect(facts.sha256 == "8479e43911dc45e89f934fe48d01297e16f51d17aa561d4d1c216b1ae0fcddca")
        #expect(facts.byteCount == 4 << 30)
        #expect(facts.kind == .other)
        #expect(elapsed < .seconds(100), "4 GiB took \(elapsed)")
        print("4 GiB sparse file read in \(elapsed)")
    }

    @Test("random bytes, alone and behind each format's signature", arguments: 0..<6)
    func randomBytes(signature: Int) throws {
        let signatures: [[UInt8]] = [
            [],
            [0xFF, 0xD8, 0xFF, 0xE1],
            PNGReader.signature,
            [0, 0, 0, 24] + Array("ftypheic".utf8) + [0, 0, 0, 0] + Array("mif1heic".utf8),
            [0, 0, 0, 20] + Array("ftypqt  ".utf8) + [0, 0, 0, 0] + Array("qt  ".utf8),
            [0x49, 0x49, 0x2A, 0x00, 8, 0, 0, 0],
        ]
        var generator = SplitMix64(seed: UInt64(signature) &* 0x9E37_79B9)
        let scratch = Scratch()
        for round in 0..<200 {
            let size = Int(generator.next() % 4096)
            let noise = (0..<size).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            let facts = try MediaReader.read(path: try scratch.write(signatures[signature] + noise))
            #expect(facts.sha256.count == 64, "round \(round)")
        }
    }

    @Test("HEIC item boxes that lie (iloc extents that wrap or run to the end …): libheif never aborts",
          arguments: ["photo.heic", "live2.heic"])
    func lyingHEIFItems(name: String) throws {
        // libheif 1.15 asserts when a read it was promised fails: the fuzz
        // loop found an iloc extent length of 0 ("to the end of the file").
        let media = try MediaFixtures.get()
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: media.directory + "/" + name)))
        let scratch = Scratch()
        var tried = 0
        for box in ["iloc", "pitm", "iinf", "infe", "ipma", "ispe", "iref", "idat"] {
            guard let at = bytes.firstRange(of: Array(box.utf8))?.lowerBound else { continue }
            for position in stride(from: at - 4, to: min(bytes.count - 4, at + 64), by: 1) {
                for value: [UInt8] in [[0, 0, 0, 0], [0xFF, 0xFF, 0xFF, 0xFF], [0x7F, 0xFF, 0xFF, 0xFF], [0x80, 0, 0, 0], [0, 0, 0x10, 0]] {
                    var mutant = bytes
                    mutant.replaceSubrange(position..<position + 4, with: value)
                    let facts = try MediaReader.read(path: try scratch.write(mutant))
                    #expect(facts.sha256.count == 64)
                    tried += 1
                }
            }
        }
        #expect(tried > 500)
    }

    // MARK: - ISO-BMFF boxes that lie

    @Test("moov after mdat, with a 64-bit mdat size")
    func moovAfterLargeMdat() throws {
        let scratch = Scratch()
        let mdat = Box.large("mdat", [UInt8](repeating: 0xAB, count: 5000))
        let file = Box.ftyp("qt  ") + mdat + Box.movie(created: 3_646_200_000, timescale: 600, duration: 1200, width: 1920, height: 1080)
        let facts = try MediaReader.read(path: try scratch.write(file))
        #expect(facts.duration == 2)
        #expect(facts.width == 1920 && facts.height == 1080)
        #expect(facts.captured == "2019-07-17T09:20:00Z")  // date -u -d @$((3646200000 - 2082844800))
    }

    @Test("an unknown mvhd duration (all ones, or 0) is no duration, and the date is still read", arguments: [UInt32.max, 0])
    func unknownDuration(duration: UInt32) throws {
        let scratch = Scratch()
        let file = Box.ftyp("qt  ") + Box.movie(created: 3_646_200_000, timescale: 600, duration: duration, width: 64, height: 48)
        let facts = try MediaReader.read(path: try scratch.write(file))
        #expect(facts.duration == nil)
        #expect(facts.captured == "2019-07-17T09:20:00Z")
        #expect(facts.width == 64)
    }

    @Test("box sizes past the end, zero, smaller than a header, 64-bit huge: no facts from them, no hang",
          arguments: ["past the end", "zero", "four", "huge 64-bit", "64-bit zero", "deep cut"])
    func lyingSizes(kind: String) throws {
        let scratch = Scratch()
        let movie = Box.movie(created: 3_646_200_000, timescale: 600, duration: 1200, width: 640, height: 480)
        var file = Box.ftyp("isom")
        switch kind {
        case "past the end": file += Box.sized("mdat", 0x7FFF_FFF0, [1, 2, 3]) + movie
        case "zero": file += Box.sized("mdat", 0, [1, 2, 3]) + movie  // runs to the end: moov is inside it
        case "four": file += Box.sized("free", 4, []) + movie  // would loop if taken
        case "huge 64-bit": file += [0, 0, 0, 1] + Array("mdat".utf8) + [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF] + movie
        case "64-bit zero": file += [0, 0, 0, 1] + Array("mdat".utf8) + [0, 0, 0, 0, 0, 0, 0, 0] + movie
        default:  // moov claims far more than the file has; its mvhd is whole, a tkhd is cut
            file += Box.sized("moov", 1 << 30, Box.movieHeader(created: 3_646_200_000, timescale: 600, duration: 1200)
                + Box.sized("trak", 500, Box.sized("tkhd", 92, [0, 0, 0])))
        }
        let facts = try MediaReader.read(path: try scratch.write(file))
        #expect(facts.sha256.count == 64)
        if kind == "deep cut" {
            #expect(facts.duration == 2)
            #expect(facts.width == nil)
        } else {
            #expect(facts.width == nil && facts.duration == nil)
        }
    }

    @Test("a million tiny boxes before moov: the walk stops at its box limit, quickly")
    func manyBoxes() throws {
        let scratch = Scratch()
        var file = Box.ftyp("isom")
        for _ in 0..<200_000 { file += Box.sized("free", 8, []) }
        file += Box.movie(created: 3_646_200_000, timescale: 600, duration: 1200, width: 640, height: 480)
        let start = ContinuousClock.now
        let facts = try MediaReader.read(path: try scratch.write(file))
        #expect(facts.duration == nil)
        #expect(ContinuousClock.now - start < .seconds(20))
    }

    @Test("a keys box with a huge count and an ilst whose indexes point nowhere")
    func lyingKeys() throws {
        let scratch = Scratch()
        let keys = Box.sized("keys", 0, [0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF] + [0, 0, 0, 12] + Array("mdtaabcd".utf8))
        let item = Box.sized("data", 0, [0, 0, 0, 1, 0, 0, 0, 0] + Array("x".utf8))
        let list = Box.sized("ilst", 0, Box.raw([0, 0, 0, 9], Box.fix(item)) + Box.raw([0xFF, 0xFF, 0xFF, 0xFF], Box.fix(item)))
        let meta = Box.sized("meta", 0, Box.sized("hdlr", 0, [UInt8](repeating: 0, count: 24)) + Box.fix(keys) + Box.fix(list))
        let file = Box.ftyp("qt  ") + Box.sized("moov", 0, Box.fix(meta))
        let facts = try MediaReader.read(path: try scratch.write(Box.fix(file)))
        #expect(facts.contentIdentifier == nil)
    }

    // MARK: - Dates and places

    @Test("dates: EXIF with and without offsets, Apple's ISO 8601, QuickTime seconds; garbage is no date")
    func dates() {
        #expect(CaptureDate.exif("2019:07:14 09:30:00", offset: "+02:00") == "2019-07-14T09:30:00+02:00")
        #expect(CaptureDate.exif("2019:07:14 09:30:00", offset: nil) == "2019-07-14T09:30:00")
        #expect(CaptureDate.exif("2019:07:14 09:30:00", offset: "   :  ") == "2019-07-14T09:30:00")
        #expect(CaptureDate.exif("0000:00:00 00:00:00", offset: nil) == nil)
        #expect(CaptureDate.exif("    :  :     :  :  ", offset: nil) == nil)
        #expect(CaptureDate.exif("2019:02:29 09:30:00", offset: nil) == nil)
        #expect(CaptureDate.exif("2020:02:29 23:59:59", offset: "-09:30") == "2020-02-29T23:59:59-09:30")
        #expect(CaptureDate.iso8601("2019-07-14T09:30:00+0200") == "2019-07-14T09:30:00+02:00")
        #expect(CaptureDate.iso8601("2019-07-14T09:30:00.123Z") == "2019-07-14T09:30:00Z")
        #expect(CaptureDate.iso8601("2019-07-14T09:30:00") == "2019-07-14T09:30:00")
        #expect(CaptureDate.iso8601("2019-07-14T09:30:00+99:00") == nil)
        #expect(CaptureDate.quickTime(0) == nil)
        #expect(CaptureDate.quickTime(UInt64.max) == nil)
        #expect(CaptureDate.quickTime(2_082_844_800 + 1_563_089_400) == "2019-07-14T07:30:00Z")
    }

    @Test("ftyp brands: HEIC, AVIF and a bare mif1 are stills; a HEIF sequence, MP4, MOV and CR3 are not")
    func brands() {
        func still(_ major: String, _ compatible: [String]) -> Bool? {
            let bytes = Box.box("ftyp", Array(major.utf8) + [0, 0, 0, 0] + compatible.flatMap { Array($0.utf8) })
            return FileTypeBox(Bytes(bytes)).map(\.isStillImage)
        }
        #expect(still("heic", ["mif1", "heic"]) == true)
        #expect(still("avif", ["avif", "mif1", "miaf"]) == true)
        #expect(still("abcd", ["mif1"]) == true)
        #expect(still("msf1", ["msf1", "hevc", "mif1"]) == false)
        #expect(still("isom", ["isom", "mif1"]) == false)
        #expect(still("qt  ", ["qt  "]) == false)
        #expect(still("abcd", ["mif1", "isom"]) == false)
        #expect(FileTypeBox(Bytes(Box.box("ftyp", Array("crx ".utf8) + [0, 0, 0, 1])))?.isCanonRaw == true)
        #expect(FileTypeBox(Bytes(Array("ftyp".utf8))) == nil)
    }

    @Test("places: ISO 6709 in, four decimals out; out of range is no place")
    func places() {
        #expect(ISO6709.normalise("+48.8584+002.2945+035.000/") == "+48.8584+002.2945/")
        #expect(ISO6709.normalise("-22.95190-043.21050/") == "-22.9519-043.2105/")
        #expect(ISO6709.normalise("+91.0+002.0/") == nil)
        #expect(ISO6709.normalise("garbage") == nil)
        #expect(ISO6709.normalise("+1+2+3+4+5/") == nil)
        #expect(ISO6709.format(latitude: -0.00001, longitude: 0) == "+00.0000+000.0000/")
        #expect(ISO6709.format(latitude: .nan, longitude: 0) == nil)
    }

    @Test("Apple MakerNote: the content identifier by hand; a lying IFD gives none")
    func makerNote() {
        let value = Array("ABC-123\0".utf8)
        var note = AppleMakerNote.signature + [0, 1] + Array("MM".utf8) + [0, 1]
        note += [0x00, 0x11, 0x00, 0x02, 0, 0, 0, UInt8(value.count), 0, 0, 0, 32] + [0, 0, 0, 0] + value
        #expect(AppleMakerNote.contentIdentifier(note) == "ABC-123")
        var lying = note
        lying[27] = 0xF0  // the value's offset points past the end
        #expect(AppleMakerNote.contentIdentifier(lying) == nil)
        #expect(AppleMakerNote.contentIdentifier(Array(note.prefix(20))) == nil)
        #expect(AppleMakerNote.contentIdentifier([]) == nil)
    }
}

/// Builds ISO-BMFF boxes for the hostile tests (hand-made on purpose: the
/// tools never write such files).
enum Box {
    static func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    static func be64(_ v: UInt64) -> [UInt8] { be32(UInt32(v >> 32)) + be32(UInt32(v & 0xFFFF_FFFF)) }

    /// A box whose size field says `size` (0: fixed up later by `fix` when nested, "to the end" at top level).
    static func sized(_ type: String, _ size: UInt32, _ payload: [UInt8]) -> [UInt8] { be32(size) + Array(type.utf8) + payload }
    static func raw(_ type: [UInt8], _ body: [UInt8]) -> [UInt8] { Array(body[0..<4]) + type + body[8...] }
    /// Sets a box's 32-bit size to its real length.
    static func fix(_ box: [UInt8]) -> [UInt8] { be32(UInt32(box.count)) + box[4...] }
    static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] { sized(type, UInt32(8 + payload.count), payload) }
    static func large(_ type: String, _ payload: [UInt8]) -> [UInt8] { be32(1) + Array(type.utf8) + be64(UInt64(16 + payload.count)) + payload }
    static func ftyp(_ brand: String) -> [UInt8] { box("ftyp", Array(brand.utf8) + [0, 0, 0, 0] + Array(brand.utf8)) }

    static func movieHeader(created: UInt32, timescale: UInt32, duration: UInt32) -> [UInt8] {
        box("mvhd", [0, 0, 0, 0] + be32(created) + be32(created) + be32(timescale) + be32(duration) + [UInt8](repeating: 0, count: 80))
    }

    static func movie(created: UInt32, timescale: UInt32, duration: UInt32, width: UInt32, height: UInt32) -> [UInt8] {
        let tkhd = box("tkhd", [0, 0, 0, 3] + [UInt8](repeating: 0, count: 72) + be32(width << 16) + be32(height << 16))
        let hdlr = box("hdlr", [0, 0, 0, 0, 0, 0, 0, 0] + Array("vide".utf8) + [UInt8](repeating: 0, count: 12))
        return box("moov", movieHeader(created: created, timescale: timescale, duration: duration) + box("trak", tkhd + box("mdia", hdlr)))
    }
}

/// A small seeded generator (SplitMix64), so every run sees the same bytes.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
