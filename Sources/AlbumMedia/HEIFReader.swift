import CHeif

/// HEIF/HEIC/AVIF stills through libheif: the primary image's stored size
/// (`ispe`, as exiftool reports it) and its Exif item, handed to libexif.
/// libheif reads through a `heif_reader` over pread, so the file is never
/// loaded whole, and the reader refuses to feed it more than `readLimit`
/// bytes in all (libheif reads boxes, not the coded image, for this).
enum HEIFReader {
    static let readLimit: Int64 = 64 << 20
    static let exifLimit = 1 << 20

    private static let initialised: Bool = {
        _ = heif_init(nil)
        return true
    }()

    /// What libheif reads, and the first I/O error it met.
    private final class Source {
        let input: FileInput
        var position: Int64 = 0
        var delivered: Int64 = 0
        var failure: MediaReadError?
        init(_ input: FileInput) { self.input = input }
    }

    static func read(_ input: FileInput) throws(MediaReadError) -> StillFacts {
        _ = initialised
        var facts = StillFacts()
        let source = Source(input)
        var reader = heif_reader()
        reader.reader_api_version = 1
        reader.get_position = { userdata in
            Unmanaged<Source>.fromOpaque(userdata!).takeUnretainedValue().position
        }
        // libheif 1.15 asserts (aborts the process) when a seek or read it
        // was told it could make fails (box.cc, Box_iloc::read_data, found
        // by the fuzz loop: an iloc extent whose offset + length wraps). So
        // these never fail: a read outside the file, past the read budget or
        // after an I/O error gets zeros (libheif then finds no valid data),
        // and the I/O error is thrown once libheif returns.
        reader.read = { data, size, userdata in
            let source = Unmanaged<Source>.fromOpaque(userdata!).takeUnretainedValue()
            guard let data else { return 0 }
            let buffer = UnsafeMutableRawBufferPointer(start: data, count: size)
            var got = 0
            if source.failure == nil, source.position >= 0, source.position < source.input.size,
               Int64(size) <= HEIFReader.readLimit - source.delivered {
                do throws(MediaReadError) {
                    got = try source.input.readFully(into: buffer, at: source.position)
                } catch {
                    source.failure = error
                }
            }
            if got < size { buffer[got...].initializeMemory(as: UInt8.self, repeating: 0) }
            source.position = source.position.addingReportingOverflow(Int64(size)).overflow ? .max : source.position + Int64(size)
            source.delivered += Int64(got)
            return 0
        }
        reader.seek = { position, userdata in
            Unmanaged<Source>.fromOpaque(userdata!).takeUnretainedValue().position = position
            return 0
        }
        reader.wait_for_file_size = { target, userdata in
            let source = Unmanaged<Source>.fromOpaque(userdata!).takeUnretainedValue()
            return target >= 0 && target <= source.input.size ? heif_reader_grow_status_size_reached : heif_reader_grow_status_size_beyond_eof
        }

        guard let context = heif_context_alloc() else { return facts }
        defer { heif_context_free(context) }
        let opened = withExtendedLifetime(source) {
            heif_context_read_from_reader(context, &reader, Unmanaged.passUnretained(source).toOpaque(), nil)
        }
        if let failure = source.failure { throw failure }
        guard opened.code == heif_error_Ok else { return facts }

        var handle: OpaquePointer?
        guard heif_context_get_primary_image_handle(context, &handle).code == heif_error_Ok, let handle else { return facts }
        defer { heif_image_handle_release(handle) }
        let width = Int(heif_image_handle_get_ispe_width(handle)), height = Int(heif_image_handle_get_ispe_height(handle))
        if width > 0, height > 0 {
            facts.width = width
            facts.height = height
        }

        var ids = [heif_item_id](repeating: 0, count: 4)
        let count = Int(heif_image_handle_get_list_of_metadata_block_IDs(handle, "Exif", &ids, Int32(ids.count)))
        for id in ids.prefix(max(0, min(count, ids.count))) {
            let size = heif_image_handle_get_metadata_size(handle, id)
            guard size >= 4, size <= exifLimit else { continue }
            var block = [UInt8](repeating: 0, count: size)
            let got = withExtendedLifetime(source) { heif_image_handle_get_metadata(handle, id, &block) }
            if let failure = source.failure { throw failure }
            guard got.code == heif_error_Ok else { continue }
            // The item starts with the offset of the TIFF header after these 4 bytes.
            let skip = Bytes(block).u32(0).map { Int($0) } ?? 0
            guard skip <= size - 4 else { continue }
            if let exif = ExifReader.read(block[(4 + skip)...]) {
                facts.exif = exif
                break
            }
        }
        return facts
    }
}
