import AlbumCore
import AlbumMedia

/// AlbumMedia's readers (libmagic, libexif, libheif, libcrypto, the ISO-BMFF
/// reader) in this process: for `fsck --verify`'s hashing and the facts
/// worker. The daemon reads through IsolatedFactsReader.
struct MediaFactsReader: AssetFactsReader {
    func facts(ofFileAt descriptor: Int32) throws -> AssetFacts {
        Self.facts(try MediaReader.read(fileDescriptor: descriptor))
    }

    func facts(ofPath path: String) throws -> AssetFacts {
        Self.facts(try MediaReader.read(path: path))
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
