import CExif

/// What an EXIF block says, read with libexif. The block is a TIFF stream
/// (byte order, IFD0 → Exif IFD, GPS IFD), with or without the `Exif\0\0`
/// header JPEG puts before it; libexif wants the header, so it is added.
struct ExifFacts {
    var captured: String?
    var width: Int?
    var height: Int?
    var location: String?
    var contentIdentifier: String?
    var isScreenshot = false
    var make: String?
    /// TIFF Orientation (1–8): how to turn the stored pixels to show them (thumbnails).
    var orientation: Int?
}

enum ExifReader {
    static let header: [UInt8] = Array("Exif".utf8) + [0, 0]

    /// Tags libexif 0.6.24 names but some builds do not: by number.
    private enum Tag: UInt32 {
        case make = 0x010F
        case orientation = 0x0112
        case dateTime = 0x0132
        case exifOffsetTime = 0x9010
        case offsetTimeOriginal = 0x9011
        case offsetTimeDigitized = 0x9012
        case dateTimeOriginal = 0x9003
        case dateTimeDigitized = 0x9004
        case makerNote = 0x927C
        case userComment = 0x9286
        case pixelXDimension = 0xA002
        case pixelYDimension = 0xA003
        case gpsLatitudeRef = 0x0001
        case gpsLatitude = 0x0002
        case gpsLongitudeRef = 0x0003
        case gpsLongitude = 0x0004
    }

    static func read(_ block: ArraySlice<UInt8>) -> ExifFacts? {
        guard block.count >= 8 else { return nil }
        let bytes = block.starts(with: header) ? Array(block) : header + block
        guard let data = exif_data_new() else { return nil }
        defer { exif_data_unref(data) }
        // Read what is there, change nothing: no "fixing" to the standard
        // (which adds default entries), no dropping of tags it does not know.
        exif_data_unset_option(data, EXIF_DATA_OPTION_IGNORE_UNKNOWN_TAGS)
        exif_data_unset_option(data, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION)
        exif_data_set_option(data, EXIF_DATA_OPTION_DONT_CHANGE_MAKER_NOTE)
        bytes.withUnsafeBufferPointer { exif_data_load_data(data, $0.baseAddress, UInt32($0.count)) }
        let block = ExifBlock(data: data, order: exif_data_get_byte_order(data))

        var facts = ExifFacts()
        facts.make = block.text(.make, in: EXIF_IFD_0)
        facts.orientation = block.integer(.orientation, in: EXIF_IFD_0).flatMap { (1...8).contains($0) ? $0 : nil }
        if let original = block.text(.dateTimeOriginal, in: EXIF_IFD_EXIF) {
            facts.captured = CaptureDate.exif(original, offset: block.text(.offsetTimeOriginal, in: EXIF_IFD_EXIF))
        }
        if facts.captured == nil, let digitized = block.text(.dateTimeDigitized, in: EXIF_IFD_EXIF) {
            facts.captured = CaptureDate.exif(digitized, offset: block.text(.offsetTimeDigitized, in: EXIF_IFD_EXIF))
        }
        if let w = block.integer(.pixelXDimension, in: EXIF_IFD_EXIF), let h = block.integer(.pixelYDimension, in: EXIF_IFD_EXIF),
           w > 0, h > 0 {
            facts.width = w
            facts.height = h
        }
        if let lat = block.degrees(.gpsLatitude), let lon = block.degrees(.gpsLongitude) {
            let south = block.text(.gpsLatitudeRef, in: EXIF_IFD_GPS)?.uppercased() == "S"
            let west = block.text(.gpsLongitudeRef, in: EXIF_IFD_GPS)?.uppercased() == "W"
            facts.location = ISO6709.format(latitude: south ? -lat : lat, longitude: west ? -lon : lon)
        }
        if let comment = block.raw(.userComment, in: EXIF_IFD_EXIF) {
            facts.isScreenshot = userComment(comment, bigEndian: block.order == EXIF_BYTE_ORDER_MOTOROLA) == "Screenshot"
        }
        if let note = block.raw(.makerNote, in: EXIF_IFD_EXIF) {
            facts.contentIdentifier = AppleMakerNote.contentIdentifier(note)
        }
        return facts
    }

    /// UserComment: an 8-byte character code, then the text.
    static func userComment(_ bytes: [UInt8], bigEndian: Bool) -> String? {
        let code = Bytes(bytes).slice(0, 8).map(Array.init) ?? []
        if code == Array("UNICODE\0".utf8) {
            var units: [UInt16] = []
            var i = 8
            while i + 1 < bytes.count {
                let first = UInt16(bytes[i]), second = UInt16(bytes[i + 1])
                let unit: UInt16 = bigEndian ? first << 8 | second : second << 8 | first
                if unit == 0 { break }
                units.append(unit)
                i += 2
            }
            return Array(String(decoding: units, as: UTF16.self).utf8).trimmedText()
        }
        if code == Array("ASCII\0\0\0".utf8) || code == [UInt8](repeating: 0, count: 8) || code == Array("JIS\0\0\0\0\0".utf8) {
            return bytes.dropFirst(8).trimmedText()
        }
        return bytes.trimmedText()
    }

    /// The loaded entries, looked up by IFD and tag.
    private struct ExifBlock {
        let data: UnsafeMutablePointer<ExifData>
        let order: ExifByteOrder

        func entry(_ tag: Tag, in ifd: ExifIfd) -> UnsafeMutablePointer<ExifEntry>? {
            let contents = withUnsafeBytes(of: data.pointee.ifd) { Array($0.bindMemory(to: UnsafeMutablePointer<ExifContent>?.self)) }
            guard Int(ifd.rawValue) < contents.count, let content = contents[Int(ifd.rawValue)] else { return nil }
            return exif_content_get_entry(content, ExifTag(rawValue: tag.rawValue))
        }

        func raw(_ tag: Tag, in ifd: ExifIfd) -> [UInt8]? {
            guard let e = entry(tag, in: ifd), let bytes = e.pointee.data, e.pointee.size > 0 else { return nil }
            return Array(UnsafeBufferPointer(start: bytes, count: Int(e.pointee.size)))
        }

        func text(_ tag: Tag, in ifd: ExifIfd) -> String? {
            guard let e = entry(tag, in: ifd), e.pointee.format == EXIF_FORMAT_ASCII || e.pointee.format == EXIF_FORMAT_UNDEFINED
            else { return nil }
            return raw(tag, in: ifd)?.trimmedText()
        }

        func integer(_ tag: Tag, in ifd: ExifIfd) -> Int? {
            guard let e = entry(tag, in: ifd), let bytes = e.pointee.data, e.pointee.components >= 1 else { return nil }
            switch e.pointee.format {
            case EXIF_FORMAT_SHORT where e.pointee.size >= 2: return Int(exif_get_short(bytes, order))
            case EXIF_FORMAT_LONG where e.pointee.size >= 4: return Int(exif_get_long(bytes, order))
            default: return nil
            }
        }

        /// Three RATIONALs (degrees, minutes, seconds) as decimal degrees.
        func degrees(_ tag: Tag) -> Double? {
            guard let e = entry(tag, in: EXIF_IFD_GPS), e.pointee.format == EXIF_FORMAT_RATIONAL,
                  e.pointee.components >= 1, let bytes = e.pointee.data else { return nil }
            let parts = min(3, Int(e.pointee.components), Int(e.pointee.size) / 8)
            var value = 0.0
            for i in 0..<parts {
                let r = exif_get_rational(bytes + 8 * i, order)
                guard r.denominator != 0 else { return i == 0 ? nil : value }
                value += Double(r.numerator) / Double(r.denominator) / [1, 60, 3600][i]
            }
            return parts > 0 ? value : nil
        }
    }
}

/// Apple's MakerNote, read by hand: libexif's Apple decoder (0.6.24) gives
/// the ContentIdentifier (tag 0x0011) as an empty string. The note starts
/// `Apple iOS\0`, a 16-bit version, a byte order (`MM`), then at byte 14 an
/// IFD whose offsets count from the start of the note.
enum AppleMakerNote {
    static let signature: [UInt8] = Array("Apple iOS".utf8) + [0]
    static let contentIdentifierTag: UInt16 = 0x0011

    static func contentIdentifier(_ note: [UInt8]) -> String? {
        var b = Bytes(note)
        guard b.starts(with: signature), let order = b.slice(12, 2) else { return nil }
        if order.elementsEqual([0x49, 0x49]) { b.bigEndian = false } else if !order.elementsEqual([0x4D, 0x4D]) { return nil }
        guard let count = b.u16(14) else { return nil }
        for i in 0..<Int(min(count, 512)) {
            let at = 16 + 12 * i
            guard let tag = b.u16(at), let type = b.u16(at + 2), let length = b.u32(at + 4) else { return nil }
            guard tag == contentIdentifierTag, type == 2, length > 0, length < 4096 else { continue }
            let value = length <= 4 ? b.slice(at + 8, Int(length)) : b.u32(at + 8).flatMap { b.slice(Int($0), Int(length)) }
            return value?.trimmedText()
        }
        return nil
    }
}
