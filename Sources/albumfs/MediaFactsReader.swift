import AlbumCore
import AlbumMedia
import Glibc

/// AlbumMedia's readers (libmagic, libexif, libheif, libcrypto, the ISO-BMFF
/// reader) in this process: for `fsck --verify`'s hashing and the facts
/// worker. The daemon reads through IsolatedFactsReader.
struct MediaFactsReader: AssetFactsReader {
    func facts(ofFileAt descriptor: Int32) throws -> AssetFacts {
        Self.facts(try MediaReader.read(fileDescriptor: descriptor))
    }

    /// The facts worker's read: the facts, and a photo's thumbnail (SEMANTICS.md § Thumbnails).
    func factsAndThumbnail(ofPath path: String) throws -> AssetFacts {
        let fd = try MediaReader.openForReading(path)
        defer { close(fd) }
        var facts = Self.facts(try MediaReader.read(fileDescriptor: fd))
        if facts.kind == .photo { facts.thumbnail = try Thumbnail.png(fileDescriptor: fd) }
        return facts
    }

    private static func facts(_ media: MediaFacts) -> AssetFacts {
        AssetFacts(sha256: media.sha256, type: media.type, kind: AssetFacts.Kind(rawValue: media.kind.rawValue) ?? .other,
                          captured: media.captured, width: media.width, height: media.height, duration: media.duration,
                          location: media.location, contentIdentifier: media.contentIdentifier,
                          isScreenshot: media.isScreenshot, isRaw: media.isRaw)
    }

    func sha256(ofFileAt descriptor: Int32) throws -> String {
        try MediaReader.hashOnly(fileDescriptor: descriptor)
    }
}
