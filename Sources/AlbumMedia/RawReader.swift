/// Camera raw files, told by content. Most are TIFF streams (DNG, CR2, NEF,
/// ARW, PEF, ORF, RW2 …) whose IFDs say "this is sensor data": a DNGVersion
/// tag, or a colour-filter-array (or linear raw) photometric interpretation
/// in IFD0 or a SubIFD; others have their own signature (CR2's `CR` at byte
/// 8, ORF's `IIRO`, RW2's `IIU`, RAF's `FUJIFILMCCD-RAW`, CR3's `crx ` ftyp
/// brand). A small IFD walk, written by hand: libexif reads neither SubIFDs
/// nor these tags. At most 16 IFDs of at most 512 entries each.
struct TIFFFacts {
    var isRaw = false
    var isDNG = false
    var make: String?
    var width: Int?
    var height: Int?
}

enum TIFFReader {
    static let maximumIFDs = 16
    static let maximumEntries = 512

    private enum Tag: UInt16 {
        case newSubfileType = 0x00FE, width = 0x0100, height = 0x0101, photometric = 0x0106
        case make = 0x010F, subIFDs = 0x014A, dngVersion = 0xC612
    }

    static func isTIFF(_ prefix: Bytes) -> Bool {
        prefix.starts(with: [0x49, 0x49]) || prefix.starts(with: [0x4D, 0x4D])
    }

    static func read(_ input: FileInput, prefix: Bytes) throws(MediaReadError) -> TIFFFacts {
        var facts = TIFFFacts()
        var b = prefix
        b.bigEndian = prefix.starts(with: [0x4D, 0x4D])
        guard let magic = b.u16(2), let first = b.u32(4) else { return facts }
        // Olympus ORF (0x4F52, 0x5352), Panasonic RW2 (0x0055), Canon CR2 (TIFF + "CR").
        if magic == 0x4F52 || magic == 0x5352 || magic == 0x0055 || b.slice(8, 2)?.elementsEqual([0x43, 0x52]) == true {
            facts.isRaw = true
        }
        guard magic == 42 || facts.isRaw else { return facts }
        var queue = [Int64(first)]
        var seen = Set<Int64>()
        var best: (area: Int, width: Int, height: Int, main: Bool)?
        var isFirst = true
        while let offset = queue.first, seen.count < maximumIFDs {
            queue.removeFirst()
            guard offset >= 8, offset < input.size, seen.insert(offset).inserted else { continue }
            let head = Bytes(try input.read(at: offset, count: 2), bigEndian: b.bigEndian)
            guard let count = head.u16(0), count > 0, Int(count) <= maximumEntries else { continue }
            let ifd = Bytes(try input.read(at: offset + 2, count: Int(count) * 12), bigEndian: b.bigEndian)
            var width: Int?, height: Int?, subfile = 0
            for i in 0..<Int(count) {
                let at = i * 12
                guard let tag = ifd.u16(at), let type = ifd.u16(at + 2), let n = ifd.u32(at + 4) else { break }
                let value = type == 3 ? ifd.u16(at + 8).map(Int.init) : ifd.u32(at + 8).map(Int.init)
                switch Tag(rawValue: tag) {
                case .newSubfileType: subfile = value ?? 0
                case .width: width = value
                case .height: height = value
                case .photometric where value == 32803 || value == 34892: facts.isRaw = true
                case .dngVersion: facts.isDNG = true; facts.isRaw = true
                case .make where isFirst && type == 2:
                    if n <= 4 {
                        facts.make = ifd.slice(at + 8, Int(n))?.trimmedText()
                    } else if let v = value {
                        facts.make = try input.read(at: Int64(v), count: min(Int(n), 64)).trimmedText()
                    }
                case .subIFDs:
                    if n == 1, let v = value {
                        queue.append(Int64(v))
                    } else if let v = value, n <= 16 {
                        let list = Bytes(try input.read(at: Int64(v), count: Int(n) * 4), bigEndian: b.bigEndian)
                        for k in 0..<Int(n) { if let o = list.u32(k * 4) { queue.append(Int64(o)) } }
                    }
                default: break
                }
            }
            if let width, let height, width > 0, height > 0 {
                let candidate = (area: width * height, width: width, height: height, main: subfile & 1 == 0)
                if best == nil || (candidate.main && !best!.main) || (candidate.main == best!.main && candidate.area > best!.area) {
                    best = candidate
                }
            }
            if isFirst, let next = Bytes(try input.read(at: offset + 2 + Int64(count) * 12, count: 4), bigEndian: b.bigEndian).u32(0), next != 0 {
                queue.append(Int64(next))
            }
            isFirst = false
        }
        facts.width = best?.width
        facts.height = best?.height
        return facts
    }

    /// A MIME type for a raw file libmagic calls `image/tiff`.
    static func rawType(_ facts: TIFFFacts) -> String? {
        if facts.isDNG { return "image/x-adobe-dng" }
        guard facts.isRaw, let make = facts.make?.uppercased() else { return nil }
        if make.hasPrefix("NIKON") { return "image/x-nikon-nef" }
        if make.hasPrefix("SONY") { return "image/x-sony-arw" }
        if make.hasPrefix("PENTAX") || make.hasPrefix("RICOH") { return "image/x-pentax-pef" }
        if make.hasPrefix("SAMSUNG") { return "image/x-samsung-srw" }
        if make.hasPrefix("CANON") { return "image/x-canon-cr2" }
        return nil
    }
}
