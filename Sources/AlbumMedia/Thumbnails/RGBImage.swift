/// 8-bit RGB pixels, row after row with no padding: what the decoders give
/// and the PNG encoder takes.
struct RGBImage: Equatable {
    let width: Int
    let height: Int
    var pixels: [UInt8]

    init(width: Int, height: Int, pixels: [UInt8]) {
        precondition(width > 0 && height > 0 && pixels.count == width * height * 3)
        (self.width, self.height, self.pixels) = (width, height, pixels)
    }

    /// At most `side` pixels on its longer side, the aspect ratio kept: each
    /// new pixel is the mean of the source pixels it covers (a box filter,
    /// which a reduction by a large factor needs; no new pixel is made from
    /// one source pixel alone). An image already small enough is kept.
    func fitting(_ side: Int) -> RGBImage {
        guard max(width, height) > side else { return self }
        let scale = Double(max(width, height)) / Double(side)
        let newWidth = max(1, Int((Double(width) / scale).rounded()))
        let newHeight = max(1, Int((Double(height) / scale).rounded()))
        // The source columns each new column covers: [starts[x], starts[x + 1]).
        let columns = (0...newWidth).map { min(width, $0 * width / newWidth) }
        let rows = (0...newHeight).map { min(height, $0 * height / newHeight) }
        var result = [UInt8](repeating: 0, count: newWidth * newHeight * 3)
        var sums = [Int](repeating: 0, count: newWidth * 3)
        pixels.withUnsafeBufferPointer { source in
            for y in 0..<newHeight {
                for i in sums.indices { sums[i] = 0 }
                let rowCount = max(1, rows[y + 1] - rows[y])
                for sourceRow in rows[y]..<max(rows[y] + 1, rows[y + 1]) {
                    let base = sourceRow * width * 3
                    for x in 0..<newWidth {
                        var r = 0, g = 0, b = 0
                        for column in columns[x]..<max(columns[x] + 1, columns[x + 1]) {
                            let p = base + column * 3
                            r += Int(source[p])
                            g += Int(source[p + 1])
                            b += Int(source[p + 2])
                        }
                        sums[x * 3] += r
                        sums[x * 3 + 1] += g
                        sums[x * 3 + 2] += b
                    }
                }
                for x in 0..<newWidth {
                    let count = rowCount * max(1, columns[x + 1] - columns[x])
                    for c in 0..<3 {
                        result[(y * newWidth + x) * 3 + c] = UInt8((sums[x * 3 + c] + count / 2) / count)
                    }
                }
            }
        }
        return RGBImage(width: newWidth, height: newHeight, pixels: result)
    }

    /// Turned as EXIF/TIFF Orientation `orientation` (1–8) says the stored
    /// pixels are to be shown: 6 is a quarter turn clockwise, 8 one
    /// counter-clockwise, 3 a half turn; 2, 4, 5 and 7 mirror as well.
    func oriented(_ orientation: Int) -> RGBImage {
        guard (2...8).contains(orientation) else { return self }
        let swaps = orientation >= 5
        let newWidth = swaps ? height : width, newHeight = swaps ? width : height
        var result = [UInt8](repeating: 0, count: pixels.count)
        for y in 0..<newHeight {
            for x in 0..<newWidth {
                let (sx, sy): (Int, Int)
                switch orientation {
                case 2: (sx, sy) = (width - 1 - x, y)
                case 3: (sx, sy) = (width - 1 - x, height - 1 - y)
                case 4: (sx, sy) = (x, height - 1 - y)
                case 5: (sx, sy) = (y, x)
                case 6: (sx, sy) = (y, height - 1 - x)
                case 7: (sx, sy) = (width - 1 - y, height - 1 - x)
                default: (sx, sy) = (width - 1 - y, x)   // 8
                }
                let from = (sy * width + sx) * 3, to = (y * newWidth + x) * 3
                result[to] = pixels[from]
                result[to + 1] = pixels[from + 1]
                result[to + 2] = pixels[from + 2]
            }
        }
        return RGBImage(width: newWidth, height: newHeight, pixels: result)
    }
}
