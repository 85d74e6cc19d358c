/// What a file says about itself, as PhotoKit knows an asset: read once after
/// the last writer closes it (see docs/SEMANTICS.md, "What albumfs knows of
/// each asset"). Every field but `sha256` may be missing: a file that is not
/// a photo, or a broken one, simply has fewer facts.
public enum MediaKind: String, Sendable {
    case photo, video, audio, other
}

public struct MediaFacts: Sendable, Equatable {
    /// SHA-256 of the whole content, 64 lowercase hex digits.
    public var sha256: String
    /// The MIME type from the content (libmagic), refined for camera raw
    /// formats libmagic calls `image/tiff` (DNG → `image/x-adobe-dng`).
    public var type: String?
    public var kind: MediaKind
    /// ISO 8601: `2019-07-14T09:30:00+02:00`, `2019-07-14T07:30:00Z`, or a
    /// floating local time `2019-07-14T09:30:00` when the file gives no offset.
    public var captured: String?
    /// Pixels as stored (before any EXIF orientation is applied).
    public var width: Int?
    public var height: Int?
    /// Seconds, for videos and audio.
    public var duration: Double?
    /// ISO 6709 latitude and longitude, four decimals: `+48.8584+002.2945/`.
    public var location: String?
    /// Apple's Live Photo pairing id: MakerNote tag 17 in the photo, the
    /// `com.apple.quicktime.content.identifier` key in the video.
    public var contentIdentifier: String?
    /// EXIF (or XMP) UserComment is `Screenshot`, as iOS writes it. Name
    /// patterns are the caller's job.
    public var isScreenshot: Bool
    /// A camera raw file (DNG, CR2, CR3, NEF, ARW, ORF, RAF, RW2 …), by content.
    public var isRaw: Bool
    /// How many bytes were hashed: the file's size when it was read. A caller
    /// that knows the size it expects can tell a file changed under the read.
    public var byteCount: Int64

    public init(
        sha256: String, type: String? = nil, kind: MediaKind = .other, captured: String? = nil,
        width: Int? = nil, height: Int? = nil, duration: Double? = nil, location: String? = nil,
        contentIdentifier: String? = nil, isScreenshot: Bool = false, isRaw: Bool = false,
        byteCount: Int64 = 0
    ) {
        self.sha256 = sha256
        self.type = type
        self.kind = kind
        self.captured = captured
        self.width = width
        self.height = height
        self.duration = duration
        self.location = location
        self.contentIdentifier = contentIdentifier
        self.isScreenshot = isScreenshot
        self.isRaw = isRaw
        self.byteCount = byteCount
    }
}

/// The one error `MediaReader` throws: a system call failed (open, fstat,
/// pread). A file whose *content* is broken is not an error.
public struct MediaReadError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The errno: EIO, ENOENT, EACCES, EBADF, EISDIR; EINVAL for a
    /// descriptor or path that is not a regular file.
    public var code: Int32
    public var operation: String

    public init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
    }

    public var description: String { "\(operation): errno \(code)" }
}
