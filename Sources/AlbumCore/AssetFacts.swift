/// What albumfs knows of an asset's content, read from the file itself
/// (SEMANTICS.md § What albumfs knows of each asset): the store's record of
/// it, and what the `user.albumfs.*` attributes and the computed views show.
public struct AssetFacts: Sendable, Equatable {
    public enum Kind: String, Sendable { case photo, video, audio, other }

    /// SHA-256 of the content, 64 lowercase hex digits.
    public var sha256: String
    /// MIME type from the content.
    public var type: String?
    public var kind: Kind
    /// ISO 8601 as the file gives it: with its offset, `Z`, or floating.
    public var captured: String?
    public var width: Int?
    public var height: Int?
    /// Seconds.
    public var duration: Double?
    /// ISO 6709.
    public var location: String?
    /// Apple's content identifier: pairs a Live Photo's image and video.
    public var contentIdentifier: String?
    /// The file says it is a screenshot (EXIF UserComment, as iOS writes it).
    public var isScreenshot: Bool
    /// A camera raw file.
    public var isRaw: Bool
    /// A PNG of the photo (SEMANTICS.md § Thumbnails), kept in its own table, not among the facts.
    public var thumbnail: [UInt8]?

    public init(sha256: String, type: String? = nil, kind: Kind = .other, captured: String? = nil,
                width: Int? = nil, height: Int? = nil, duration: Double? = nil, location: String? = nil,
                contentIdentifier: String? = nil, isScreenshot: Bool = false, isRaw: Bool = false, thumbnail: [UInt8]? = nil) {
        self.sha256 = sha256; self.type = type; self.kind = kind; self.captured = captured
        self.width = width; self.height = height; self.duration = duration; self.location = location
        self.contentIdentifier = contentIdentifier; self.isScreenshot = isScreenshot; self.isRaw = isRaw
        self.thumbnail = thumbnail
    }

    /// The `YYYY-MM` of the capture date as written in the file (the
    /// photo's own local date: no time-zone conversion), if it has one.
    var capturedMonth: String? {
        guard let captured, captured.utf8.count >= 7 else { return nil }
        let month = String(captured.prefix(7))
        return VirtualNode.month(named: Array(month.utf8)) == nil ? nil : month
    }
}

/// Reads what a content file says about itself. The daemon plugs in the
/// media readers (libmagic, libexif, libheif, libcrypto, the ISO-BMFF
/// reader); the store's tests plug in their own.
public protocol AssetFactsReader: Sendable {
    /// Facts of the file open at `descriptor` (read with pread only).
    /// Throws only when the file cannot be read at all.
    func facts(ofFileAt descriptor: Int32) throws -> AssetFacts
    /// Only the SHA-256 (`fsck --verify`).
    func sha256(ofFileAt descriptor: Int32) throws -> String
}

/// Names screenshots get on the usual systems (SEMANTICS.md: `Screenshot*`,
/// `Screen Shot*`, `Capture d’écran*`).
enum ScreenshotNames {
    static let prefixes: [Name] = ["Screenshot", "Screen Shot", "Capture d’écran", "Capture d'écran"].map { Array($0.utf8) }

    static func matches(_ name: Name) -> Bool {
        prefixes.contains { name.starts(with: $0) }
    }
}
