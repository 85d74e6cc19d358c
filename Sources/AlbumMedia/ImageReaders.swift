/// The segment and chunk walks of JPEG and PNG, written by hand (libexif
/// reads EXIF, not image sizes; libjpeg/libpng would decode). Both read only
/// headers with pread, at most `scanLimit` bytes into the file and a bounded
/// number of segments, and stop at the image data.
struct StillFacts {
    var width: Int?
    var height: Int?
    var exif: ExifFacts?
    var xmpScreenshot = false
}

enum JPEGReader {
    static let scanLimit: Int64 = 4 << 20
    static let maximumSegments = 512

    /// Reads the JPEG that starts at `start` (0, or a raw file's preview).
    static func read(_ input: FileInput, from start: Int64 = 0) throws(MediaReadError) -> StillFacts {
        var facts = StillFacts()
        var offset: Int64 = start + 2  // after SOI
        var segments = 0
        while offset < min(input.size, start + scanLimit), segments < maximumSegments {
            segments += 1
            let head = Bytes(try input.read(at: offset, count: 4))
            guard head.u8(0) == 0xFF, let marker = head.u8(1) else { break }
            if marker == 0xFF { offset += 1; continue }  // fill byte
            if marker == 0xD8 || marker == 0x01 || (0xD0...0xD7).contains(marker) { offset += 2; continue }
            if marker == 0xD9 || marker == 0xDA { break }  // EOI, SOS: the image data
            guard let length = head.u16(2), length >= 2 else { break }
            let payloadStart = offset + 4, payloadLength = Int(length) - 2
            switch marker {
            case 0xE1:
                let payload = try input.read(at: payloadStart, count: payloadLength)
                guard payload.count == payloadLength else { break }  // cut short: not read
                if facts.exif == nil, payload.starts(with: ExifReader.header) {
                    facts.exif = ExifReader.read(payload[...])
                } else if payload.starts(with: XMP.jpegSignature) {
                    facts.xmpScreenshot = facts.xmpScreenshot || XMP.saysScreenshot(payload[...])
                }
            case 0xC0...0xCF where marker != 0xC4 && marker != 0xC8 && marker != 0xCC:
                // SOFn: precision, height, width.
                let sof = Bytes(try input.read(at: payloadStart, count: 5))
                if let h = sof.u16(1), let w = sof.u16(3), w > 0, h > 0, facts.width == nil {
                    facts.width = Int(w)
                    facts.height = Int(h)
                }
            default: break
            }
            offset = payloadStart + Int64(payloadLength)
        }
        return facts
    }
}

enum PNGReader {
    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    static let maximumChunks = 4096
    static let chunkLimit = 1 << 20

    static func read(_ input: FileInput) throws(MediaReadError) -> StillFacts {
        var facts = StillFacts()
        var offset: Int64 = 8
        var chunks = 0
        while offset + 12 <= input.size, chunks < maximumChunks {
            chunks += 1
            let head = Bytes(try input.read(at: offset, count: 8))
            guard let length = head.u32(0), length <= 0x7FFF_FFFF, let type = head.fourCC(4) else { break }
            let data = offset + 8
            switch type {
            case "IHDR":
                let p = Bytes(try input.read(at: data, count: 8))
                if let w = p.u32(0), let h = p.u32(4), w > 0, h > 0, w <= 0x7FFF_FFFF, h <= 0x7FFF_FFFF {
                    facts.width = Int(w)
                    facts.height = Int(h)
                }
            case "eXIf" where length <= chunkLimit:
                let p = try input.read(at: data, count: Int(length))
                if p.count == Int(length) { facts.exif = ExifReader.read(p[...]) }
            case "iTXt" where length <= chunkLimit:
                // keyword NUL, compression flag, method, language NUL, translated NUL, text
                let p = try input.read(at: data, count: Int(length))
                if p.count == Int(length), p.starts(with: Array("XML:com.adobe.xmp\0".utf8)), p.count > 18, p[18] == 0 {
                    facts.xmpScreenshot = facts.xmpScreenshot || XMP.saysScreenshot(p[...])
                }
            case "IEND": return facts
            default: break
            }
            offset = data + Int64(length) + 4  // + CRC
        }
        return facts
    }
}

/// Just enough of XMP to see iOS's screenshot mark: an `exif:UserComment`
/// whose value is `Screenshot` (as an element, an rdf:Alt, or an attribute).
enum XMP {
    static let jpegSignature: [UInt8] = Array("http://ns.adobe.com/xap/1.0/\0".utf8)

    static func saysScreenshot(_ packet: ArraySlice<UInt8>) -> Bool {
        let text = Array(packet)
        let key = Array("UserComment".utf8)
        var i = 0
        while let at = firstIndex(of: key, in: text, from: i) {
            let after = text[(at + key.count)..<min(text.count, at + key.count + 200)]
            let window = String(decoding: after, as: UTF8.self)
            if window.hasPrefix("=\"Screenshot\"") || window.hasPrefix(">Screenshot<") || window.contains(">Screenshot</rdf:li>") {
                return true
            }
            i = at + key.count
        }
        return false
    }

    private static func firstIndex(of needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty, haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        for i in start...(haystack.count - needle.count) where haystack[i] == needle[0] {
            if haystack[i..<i + needle.count].elementsEqual(needle) { return i }
        }
        return nil
    }
}
