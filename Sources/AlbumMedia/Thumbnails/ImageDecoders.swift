import CHeif
import CPNG
import CTurboJPEG

/// The decoders thumbnails are drawn from, each a well-kept C library over
/// bytes in memory: libjpeg-turbo (decoding at 1/2, 1/4 or 1/8 scale, which
/// the DCT does almost for free), libheif (HEIC/AVIF, turned as its `irot`
/// and `imir` say; a stored thumbnail image when it is large enough) and
/// libpng. Each refuses an image over `pixelLimit` before it decodes it, and
/// a broken file decodes to nil.
enum ImageDecoders {
    /// 100 megapixels: no camera's photo is larger; a hostile header saying
    /// 60,000 × 60,000 is refused before any memory is taken for it.
    static let pixelLimit = 100_000_000

    /// The JPEG decoded at the smallest of libjpeg-turbo's scales whose longer side is still at least `side`.
    static func jpeg(_ data: [UInt8], atLeast side: Int) -> RGBImage? {
        guard let handle = tjInitDecompress() else { return nil }
        defer { tjDestroy(handle) }
        var width: Int32 = 0, height: Int32 = 0, subsampling: Int32 = 0, colorspace: Int32 = 0
        let header = data.withUnsafeBufferPointer {
            tjDecompressHeader3(handle, $0.baseAddress, UInt($0.count), &width, &height, &subsampling, &colorspace)
        }
        guard header == 0, width > 0, height > 0, Int(width) * Int(height) <= pixelLimit else { return nil }
        var count: Int32 = 0
        guard let factors = tjGetScalingFactors(&count) else { return nil }
        // TJSCALED: ceil(dimension * num / denom).
        func scaled(_ dimension: Int32, _ f: tjscalingfactor) -> Int { (Int(dimension) * Int(f.num) + Int(f.denom) - 1) / Int(f.denom) }
        var best = (width: Int(width), height: Int(height))
        for i in 0..<Int(count) {
            let f = factors[i]
            guard f.num <= f.denom else { continue }   // reductions only
            let candidate = (width: scaled(width, f), height: scaled(height, f))
            if max(candidate.width, candidate.height) >= side, candidate.width * candidate.height < best.width * best.height {
                best = candidate
            }
        }
        var pixels = [UInt8](repeating: 0, count: best.width * best.height * 3)
        let decoded = data.withUnsafeBufferPointer { source in
            pixels.withUnsafeMutableBufferPointer { target in
                tjDecompress2(handle, source.baseAddress, UInt(source.count), target.baseAddress,
                              Int32(best.width), 0, Int32(best.height), Int32(TJPF_RGB.rawValue), 0)
            }
        }
        // A warning (a truncated scan, filled with grey) still gives an image to show.
        guard decoded == 0 || tjGetErrorCode(handle) == Int32(TJERR_WARNING.rawValue) else { return nil }
        return RGBImage(width: best.width, height: best.height, pixels: pixels)
    }

    /// The HEIF's primary image, turned as it says; its stored thumbnail
    /// image instead when that one's longer side is at least `side`.
    static func heif(_ data: [UInt8], atLeast side: Int) -> RGBImage? {
        _ = heifReady
        guard let context = heif_context_alloc() else { return nil }
        defer { heif_context_free(context) }
        return data.withUnsafeBufferPointer { bytes -> RGBImage? in
            guard heif_context_read_from_memory_without_copy(context, bytes.baseAddress, bytes.count, nil).code == heif_error_Ok else { return nil }
            var primary: OpaquePointer?
            guard heif_context_get_primary_image_handle(context, &primary).code == heif_error_Ok, let primary else { return nil }
            defer { heif_image_handle_release(primary) }
            var chosen = primary
            var thumbnailHandle: OpaquePointer?
            var ids = [heif_item_id](repeating: 0, count: 4)
            let count = Int(heif_image_handle_get_list_of_thumbnail_IDs(primary, &ids, Int32(ids.count)))
            for id in ids.prefix(max(0, min(count, ids.count))) {
                var handle: OpaquePointer?
                guard heif_image_handle_get_thumbnail(primary, id, &handle).code == heif_error_Ok, let handle else { continue }
                if max(heif_image_handle_get_width(handle), heif_image_handle_get_height(handle)) >= side {
                    thumbnailHandle = handle
                    chosen = handle
                    break
                }
                heif_image_handle_release(handle)
            }
            defer { if let thumbnailHandle { heif_image_handle_release(thumbnailHandle) } }
            guard Int(heif_image_handle_get_width(chosen)) * Int(heif_image_handle_get_height(chosen)) <= pixelLimit else { return nil }
            var image: OpaquePointer?
            guard heif_decode_image(chosen, &image, heif_colorspace_RGB, heif_chroma_interleaved_RGB, nil).code == heif_error_Ok,
                  let image else { return nil }
            defer { heif_image_release(image) }
            let width = Int(heif_image_get_width(image, heif_channel_interleaved))
            let height = Int(heif_image_get_height(image, heif_channel_interleaved))
            var stride: Int32 = 0
            guard width > 0, height > 0, let plane = heif_image_get_plane_readonly(image, heif_channel_interleaved, &stride),
                  Int(stride) >= width * 3 else { return nil }
            var pixels = [UInt8](repeating: 0, count: width * height * 3)
            pixels.withUnsafeMutableBufferPointer { target in
                for row in 0..<height {
                    (target.baseAddress! + row * width * 3).update(from: plane + row * Int(stride), count: width * 3)
                }
            }
            return RGBImage(width: width, height: height, pixels: pixels)
        }
    }

    private static let heifReady: Bool = {
        _ = heif_init(nil)
        return true
    }()

    /// The PNG's pixels (an alpha channel composed over white, 16-bit taken to 8).
    static func png(_ data: [UInt8]) -> RGBImage? {
        var image = png_image()
        image.version = UInt32(PNG_IMAGE_VERSION)
        defer { png_image_free(&image) }
        let begun = data.withUnsafeBufferPointer { png_image_begin_read_from_memory(&image, $0.baseAddress, $0.count) }
        guard begun != 0, image.width > 0, image.height > 0, Int(image.width) * Int(image.height) <= pixelLimit else { return nil }
        image.format = UInt32(PNG_FORMAT_RGB)
        let width = Int(image.width), height = Int(image.height)
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        var white = png_color(red: 255, green: 255, blue: 255)
        let finished = pixels.withUnsafeMutableBufferPointer { png_image_finish_read(&image, &white, $0.baseAddress, 0, nil) }
        guard finished != 0 else { return nil }
        return RGBImage(width: width, height: height, pixels: pixels)
    }

    /// An 8-bit RGB PNG of `image`.
    static func encodePNG(_ image: RGBImage) -> [UInt8]? {
        var header = png_image()
        header.version = UInt32(PNG_IMAGE_VERSION)
        header.width = UInt32(image.width)
        header.height = UInt32(image.height)
        header.format = UInt32(PNG_FORMAT_RGB)
        defer { png_image_free(&header) }
        var size = 0
        // First the size it needs, then the PNG itself.
        guard image.pixels.withUnsafeBufferPointer({ png_image_write_to_memory(&header, nil, &size, 0, $0.baseAddress, 0, nil) }) != 0,
              size > 0 else { return nil }
        var output = [UInt8](repeating: 0, count: size)
        let written = output.withUnsafeMutableBufferPointer { target in
            image.pixels.withUnsafeBufferPointer { png_image_write_to_memory(&header, target.baseAddress, &size, 0, $0.baseAddress, 0, nil) }
        }
        guard written != 0 else { return nil }
        return Array(output.prefix(size))
    }
}
