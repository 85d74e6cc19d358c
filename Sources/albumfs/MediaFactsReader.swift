import AlbumCore
import AlbumMedia

/// The store's facts reader in the daemon and the commands: AlbumMedia's
/// readers (libmagic, libexif, libheif, libcrypto, the ISO-BMFF reader).
struct MediaFactsReader: AssetFactsReader {
    func facts(ofFileAt descriptor: Int32) throws -> AssetFacts {
        let media = try MediaReader.read(fileDescriptor: descriptor)
        return AssetFacts(sha256: media.sha256, type: media.type, kind: AssetFacts.Kind(rawValue: media.kind.rawValue) ?? .other,
                          captured: media.captured, width: media.width, height: media.height, duration: media.duration,
                          location: media.location, contentIdentifier: media.contentIdentifier,
                          isScreenshot: media.isScreenshot, isRaw: media.isRaw)
    }

    func sha256(ofFileAt descriptor: Int32) throws -> String {
        try MediaReader.hashOnly(fileDescriptor: descriptor)
    }
}
