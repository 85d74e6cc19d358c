/// Facts of a QuickTime/MP4 movie from its `moov` box: `mvhd` (creation
/// time, duration), the video track's `tkhd` (size), and Apple's metadata
/// (`meta` with `keys` + `ilst`, under `moov` or `moov/udta`; `©xyz` in udta).
struct MovieReader {
    struct Facts {
        var created: String?
        var duration: Double?
        var width: Int?
        var height: Int?
        var appleCreationDate: String?
        var location: String?
        var contentIdentifier: String?

        /// Apple's creationdate keeps the local offset; `mvhd` is UTC.
        var captured: String? { appleCreationDate ?? created }
    }

    /// Leaf boxes read into memory are at most this large.
    static let leafLimit = 64 * 1024
    static let metadataLimit = 1 << 20

    private var boxes: BoxReader
    private var facts = Facts()
    private var sawVideoTrack = false

    static func read(_ input: FileInput) throws(MediaReadError) -> Facts {
        var reader = MovieReader(boxes: BoxReader(input))
        for box in try reader.boxes.children(from: 0, to: input.size) where box.type == "moov" {
            try reader.movie(box)
            break
        }
        return reader.facts
    }

    private init(boxes: BoxReader) { self.boxes = boxes }

    private mutating func movie(_ moov: BoxReader.Box) throws(MediaReadError) {
        for box in try boxes.children(from: moov.payload, to: moov.end) {
            switch box.type {
            case "mvhd": if let p = try boxes.payload(of: box, limit: Self.leafLimit) { movieHeader(p) }
            case "trak": try track(box)
            case "meta": try metadata(box)
            case "udta": try userData(box)
            default: break
            }
        }
    }

    private mutating func movieHeader(_ p: Bytes) {
        guard let version = p.u8(0) else { return }
        let created: UInt64?, timescale: UInt32?, duration: UInt64?, unknown: UInt64
        if version == 1 {
            created = p.u64(4); timescale = p.u32(20); duration = p.u64(24); unknown = UInt64.max
        } else {
            created = p.u32(4).map(UInt64.init); timescale = p.u32(12); duration = p.u32(16).map(UInt64.init)
            unknown = UInt64(UInt32.max)
        }
        facts.created = created.flatMap(CaptureDate.quickTime)
        // All ones is "unknown"; so is 0 (a fragmented MP4 keeps its length in the fragments).
        if let timescale, timescale > 0, let duration, duration > 0, duration != unknown {
            facts.duration = Double(duration) / Double(timescale)
        }
    }

    /// Takes the first video track's size (the first track with a size when
    /// no handler says `vide`).
    private mutating func track(_ trak: BoxReader.Box) throws(MediaReadError) {
        guard !sawVideoTrack else { return }
        var size: (Int, Int)?
        var isVideo = false
        for box in try boxes.children(from: trak.payload, to: trak.end) {
            if box.type == "tkhd", let p = try boxes.payload(of: box, limit: Self.leafLimit) {
                let at = p.u8(0) == 1 ? 88 : 76
                if let w = p.u32(at), let h = p.u32(at + 4), w >> 16 > 0, h >> 16 > 0 {
                    size = (Int(w >> 16), Int(h >> 16))
                }
            } else if box.type == "mdia" {
                for inner in try boxes.children(from: box.payload, to: box.end) where inner.type == "hdlr" {
                    if let p = try boxes.payload(of: inner, limit: Self.leafLimit), p.fourCC(8) == "vide" { isVideo = true }
                }
            }
        }
        guard let size else { return }
        if isVideo || facts.width == nil {
            facts.width = size.0
            facts.height = size.1
            sawVideoTrack = isVideo
        }
    }

    private mutating func userData(_ udta: BoxReader.Box) throws(MediaReadError) {
        for box in try boxes.children(from: udta.payload, to: udta.end) {
            if box.type == "meta" {
                try metadata(box)
            } else if box.type == "\u{A9}xyz", facts.location == nil,
                      let p = try boxes.payload(of: box, limit: Self.leafLimit),
                      let length = p.u16(0), let text = p.slice(4, Int(length))?.trimmedText() {
                // QuickTime user data text: 16-bit length, 16-bit language.
                facts.location = ISO6709.normalise(text)
            }
        }
    }

    /// `meta` is a full box in ISO files (4 bytes of version and flags before
    /// its children) and a plain one in QuickTime: tell by where `hdlr` is.
    private mutating func metadata(_ meta: BoxReader.Box) throws(MediaReadError) {
        let peek = Bytes(try boxes.input.read(at: meta.payload, count: 12))
        let start = peek.fourCC(4) == "hdlr" || peek.fourCC(4) == "keys" ? meta.payload : meta.payload + 4
        var keys: [String] = []
        var list: BoxReader.Box?
        for box in try boxes.children(from: start, to: meta.end) {
            if box.type == "keys", let p = try boxes.payload(of: box, limit: Self.metadataLimit) {
                keys = Self.keys(p)
            } else if box.type == "ilst" {
                list = box
            }
        }
        guard let list, !keys.isEmpty else { return }
        for item in try boxes.children(from: list.payload, to: list.end) {
            // An item's type is the 1-based index of its key.
            let index = Int(item.code)
            guard index >= 1, index <= keys.count else { continue }
            for data in try boxes.children(from: item.payload, to: item.end) where data.type == "data" {
                guard let p = try boxes.payload(of: data, limit: Self.leafLimit),
                      p.u32(0).map({ $0 & 0xFF_FFFF }) == 1,  // well-known type 1: UTF-8
                      let value = p.slice(8, p.count - 8)?.trimmedText() else { continue }
                store(key: keys[index - 1], value: value)
            }
        }
    }

    private mutating func store(key: String, value: String) {
        switch key {
        case "com.apple.quicktime.content.identifier": facts.contentIdentifier = value
        case "com.apple.quicktime.creationdate": facts.appleCreationDate = CaptureDate.iso8601(value)
        case "com.apple.quicktime.location.ISO6709": facts.location = ISO6709.normalise(value) ?? facts.location
        default: break
        }
    }

    /// `keys`: version/flags, count, then (size, namespace, name) entries.
    private static func keys(_ p: Bytes) -> [String] {
        guard let count = p.u32(4) else { return [] }
        var keys: [String] = []
        var at = 8
        while keys.count < min(Int(count), 1024), let size = p.u32(at), size >= 8,
              let name = p.slice(at + 8, Int(size) - 8) {
            keys.append(String(decoding: name, as: UTF8.self))
            at += Int(size)
        }
        return keys
    }
}
