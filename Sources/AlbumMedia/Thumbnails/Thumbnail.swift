/// A small picture of a photo, made once when its facts are read, so that
/// a file manager never needs the original to show it (SEMANTICS.md §
/// Thumbnails). A PNG whose longer side is at most `side` pixels (the
/// freedesktop thumbnail spec's "large"), turned upright as the photo's EXIF
/// Orientation says (HEIF: as its `irot`/`imir` say).
///
/// Drawn for JPEG, HEIC/HEIF/AVIF and PNG by content, not by name; nil for
/// everything else (videos, camera raw, files it cannot decode) and for a
/// file over `fileLimit`. Hostile input: the decoders refuse an image over
/// 100 megapixels; a decoder that crashes takes the facts worker with it,
/// never the mount (the worker is a process of its own).
public enum Thumbnail {
    public static let side = 256
    public static let fileLimit: Int64 = 64 << 20

    /// Reads with pread only; the descriptor is not moved or closed.
    public static func png(fileDescriptor fd: Int32) throws -> [UInt8]? {
        let input = try FileInput(fileDescriptor: fd)
        guard input.size > 8, input.size <= fileLimit else { return nil }
        let data = try input.read(at: 0, count: Int(input.size))
        let prefix = Bytes(data)
        let image: RGBImage?
        if prefix.starts(with: [0xFF, 0xD8, 0xFF]) {
            let orientation = (try? JPEGReader.read(input))?.exif?.orientation ?? 1
            image = ImageDecoders.jpeg(data, atLeast: side)?.fitting(side).oriented(orientation)
        } else if prefix.starts(with: PNGReader.signature) {
            image = ImageDecoders.png(data)?.fitting(side)
        } else if let brands = FileTypeBox(prefix), brands.isStillImage, !brands.isCanonRaw {
            image = ImageDecoders.heif(data, atLeast: side)?.fitting(side)
        } else {
            image = nil
        }
        return image.flatMap(ImageDecoders.encodePNG)
    }
}
