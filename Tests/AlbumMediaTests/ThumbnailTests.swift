import Foundation
import Testing
@testable import AlbumMedia

/// SEMANTICS.md § Thumbnails: what the facts worker draws of each photo.
/// The photos are made here with ImageMagick, exiftool and heif-enc: 1200 ×
/// 800 pixels, a red-to-blue gradient from top to bottom, a yellow block in
/// the top-left corner as stored.
@Suite("Thumbnails: a PNG of at most 256 pixels a side, upright, of JPEG, PNG and HEIC")
struct ThumbnailTests {
    static let directory: String = {
        let path = NSTemporaryDirectory() + "albumfs-thumbnails-\(getpid())"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(atPath: ThumbnailTests.directory) }
        return path
    }()

    static func tool(_ arguments: String...) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "\(arguments.joined(separator: " ")) failed")
    }

    /// The 1200 × 800 test photo as `name` (its extension picks the format).
    static func photo(_ name: String) throws -> String {
        let path = directory + "/" + name
        try tool("convert", "-size", "1200x800", "gradient:red-blue", "-fill", "yellow",
                 "-draw", "rectangle 0,0 299,199", path)
        return path
    }

    static func thumbnail(_ path: String) throws -> RGBImage? {
        let fd = open(path, O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        guard let png = try Thumbnail.png(fileDescriptor: fd) else { return nil }
        #expect(png.starts(with: PNGReader.signature))
        return try #require(ImageDecoders.png(png), "the thumbnail is not a PNG libpng reads")
    }

    /// The pixel at (x, y), as (r, g, b).
    static func pixel(_ image: RGBImage, _ x: Int, _ y: Int) -> (Int, Int, Int) {
        let p = (y * image.width + x) * 3
        return (Int(image.pixels[p]), Int(image.pixels[p + 1]), Int(image.pixels[p + 2]))
    }

    static func isYellow(_ p: (Int, Int, Int)) -> Bool { p.0 > 200 && p.1 > 200 && p.2 < 60 }

    @Test("a JPEG: 256 × 171, the yellow block top-left, red at the top and blue at the bottom")
    func jpeg() throws {
        let image = try #require(try Self.thumbnail(try Self.photo("plain.jpg")))
        #expect((image.width, image.height) == (256, 171))
        #expect(Self.isYellow(Self.pixel(image, 10, 10)))
        #expect(!Self.isYellow(Self.pixel(image, 245, 10)))
        #expect(Self.pixel(image, 128, 80).0 < 255 && Self.pixel(image, 200, 5).0 > 200 && Self.pixel(image, 200, 165).2 > 200)
    }

    @Test("a JPEG whose EXIF Orientation is 6 (a quarter turn clockwise) is drawn upright: 171 × 256, the block top-right")
    func orientedJPEG() throws {
        let path = try Self.photo("turned.jpg")
        try Self.tool("exiftool", "-q", "-overwrite_original", "-n", "-Orientation=6", path)
        let image = try #require(try Self.thumbnail(path))
        #expect((image.width, image.height) == (171, 256))
        #expect(Self.isYellow(Self.pixel(image, 165, 10)))
        #expect(!Self.isYellow(Self.pixel(image, 5, 10)))
        // The stored top (red) is now on the right.
        #expect(Self.pixel(image, 160, 200).0 > 200 && Self.pixel(image, 5, 200).2 > 200)
    }

    @Test("a PNG and a HEIC: 256 × 171, the block top-left")
    func pngAndHEIC() throws {
        let png = try #require(try Self.thumbnail(try Self.photo("screen.png")))
        #expect((png.width, png.height) == (256, 171) && Self.isYellow(Self.pixel(png, 10, 10)))
        let source = try Self.photo("for-heic.png")
        let heic = Self.directory + "/photo.heic"
        try Self.tool("heif-enc", "-q", "80", source, "-o", heic)
        let image = try #require(try Self.thumbnail(heic))
        #expect((image.width, image.height) == (256, 171) && Self.isYellow(Self.pixel(image, 10, 10)))
    }

    @Test("a small photo is kept at its size; what is not a photo, or is broken, gets none")
    func smallAndNone() throws {
        let path = Self.directory + "/small.jpg"
        try Self.tool("convert", "-size", "100x60", "xc:green", path)
        let small = try #require(try Self.thumbnail(path))
        #expect((small.width, small.height) == (100, 60))

        let text = Self.directory + "/notes.jpg"
        try Data(repeating: 0x41, count: 5000).write(to: URL(fileURLWithPath: text))
        #expect(try Self.thumbnail(text) == nil)
        // A JPEG cut after its first 2 KiB: no crash, and no thumbnail or a partial one.
        let whole = try Data(contentsOf: URL(fileURLWithPath: try Self.photo("whole.jpg")))
        let cut = Self.directory + "/cut.jpg"
        try whole.prefix(2048).write(to: URL(fileURLWithPath: cut))
        _ = try Self.thumbnail(cut)
    }

    @Test("an image whose header says it is 60,000 × 60,000 is refused before it is decoded")
    func hugeHeader() throws {
        // A valid PNG header (IHDR) of 60000 × 60000, RGB, and one empty IDAT: libpng reads the
        // size, the decoder refuses it (3.6 gigapixels > 100 megapixels) without allocating it.
        var png = PNGReader.signature
        func chunk(_ type: String, _ body: [UInt8]) {
            var bytes = Array(type.utf8) + body
            let length = UInt32(body.count)
            png += [UInt8(length >> 24), UInt8(length >> 16 & 255), UInt8(length >> 8 & 255), UInt8(length & 255)]
            let crc = bytes.withUnsafeMutableBufferPointer { CRC32.of($0) }
            png += bytes + [UInt8(crc >> 24), UInt8(crc >> 16 & 255), UInt8(crc >> 8 & 255), UInt8(crc & 255)]
        }
        let side: [UInt8] = [0, 0, 0xEA, 0x60]
        chunk("IHDR", side + side + [8, 2, 0, 0, 0])
        chunk("IDAT", [])
        chunk("IEND", [])
        #expect(ImageDecoders.png(png) == nil)
        let path = Self.directory + "/huge.png"
        try Data(png).write(to: URL(fileURLWithPath: path))
        #expect(try Self.thumbnail(path) == nil)
    }

    @Test("the box filter averages what each pixel covers, and the eight orientations turn and mirror as TIFF says")
    func pixels() {
        // 4 × 2: a black and a white column pair; halved, one grey pixel a pair.
        let image = RGBImage(width: 4, height: 2, pixels: [0, 0, 0, 255, 255, 255, 0, 0, 0, 255, 255, 255,
                                                           0, 0, 0, 255, 255, 255, 0, 0, 0, 255, 255, 255])
        let half = image.fitting(2)
        #expect((half.width, half.height) == (2, 1) && half.pixels == [128, 128, 128, 128, 128, 128])
        // 2 × 1: pixel a (1) then b (2); what each orientation shows.
        let ab = RGBImage(width: 2, height: 1, pixels: [1, 1, 1, 2, 2, 2])
        let shown = (1...8).map { o -> [UInt8] in let t = ab.oriented(o); return stride(from: 0, to: t.pixels.count, by: 3).map { t.pixels[$0] } }
        #expect(shown == [[1, 2], [2, 1], [2, 1], [1, 2], [1, 2], [1, 2], [2, 1], [2, 1]])
        #expect(ab.oriented(6).width == 1 && ab.oriented(6).height == 2)
    }
}

/// CRC-32 (PNG's), for the test's hand-made PNG.
enum CRC32 {
    static func of(_ bytes: UnsafeMutableBufferPointer<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
