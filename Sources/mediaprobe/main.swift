// mediaprobe: AlbumMedia from the command line, for developers (not installed).
//
//   mediaprobe FILE…                       one JSON object of facts per file
//   mediaprobe --bench FILE…|DIR           facts/s and MiB/s over the files
//   mediaprobe --thumbnail FILE OUT.png    the thumbnail albumfs keeps of FILE
//   mediaprobe --fuzz SECONDS [--seed N] [--out DIR] SEED-FILE…
//                                          a seeded mutation fuzz loop over MediaReader
//
// The fuzz loop derives iteration i's input from (seed, i) alone, so any
// input can be made again (`--replay I` writes it to DIR/replay). Before each
// read the input is written to DIR/current, so a crash leaves it there; a
// read that takes longer than 10 s is a hang: the input is kept as
// DIR/hang-I and the loop exits 2.
import AlbumMedia
import Foundation
import Synchronization

/// One line to standard output, unbuffered (progress must show in a pipe too).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func json(_ facts: MediaFacts, path: String) -> String {
    var fields: [String: Any] = ["path": path, "sha256": facts.sha256, "kind": facts.kind.rawValue,
                                 "isScreenshot": facts.isScreenshot, "isRaw": facts.isRaw, "size": facts.byteCount]
    if let v = facts.type { fields["type"] = v }
    if let v = facts.captured { fields["captured"] = v }
    if let v = facts.width { fields["width"] = v }
    if let v = facts.height { fields["height"] = v }
    if let v = facts.duration { fields["duration"] = v }
    if let v = facts.location { fields["location"] = v }
    if let v = facts.contentIdentifier { fields["contentIdentifier"] = v }
    let data = try! JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
    return String(decoding: data, as: UTF8.self)
}

func files(_ arguments: ArraySlice<String>) -> [String] {
    var result: [String] = []
    for argument in arguments {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: argument, isDirectory: &isDirectory), isDirectory.boolValue {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: argument)) ?? []
            result += names.sorted().filter { !$0.hasPrefix(".") }.map { argument + "/" + $0 }
        } else {
            result.append(argument)
        }
    }
    return result
}

func bench(_ paths: [String]) throws {
    var bytes: Int64 = 0
    let start = ContinuousClock.now
    for path in paths { bytes += try MediaReader.read(path: path).byteCount }
    let read = ContinuousClock.now - start
    let hashStart = ContinuousClock.now
    for path in paths {
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        _ = try MediaReader.hashOnly(fileDescriptor: fd)
    }
    let hashed = ContinuousClock.now - hashStart
    func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
    let mib = Double(bytes) / 1_048_576
    print("files \(paths.count)  MiB \(String(format: "%.1f", mib))")
    print("read (hash + facts): \(String(format: "%.3f", seconds(read))) s  \(String(format: "%.1f", Double(paths.count) / seconds(read))) files/s  \(String(format: "%.1f", mib / seconds(read))) MiB/s")
    print("hashOnly:            \(String(format: "%.3f", seconds(hashed))) s  \(String(format: "%.1f", mib / seconds(hashed))) MiB/s")
}

// MARK: - Fuzz

struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Names whose neighbourhood is worth hitting: box types (a size precedes
/// them), TIFF headers, JPEG markers, PNG chunk types.
let landmarks: [[UInt8]] = ["ftyp", "moov", "mvhd", "trak", "tkhd", "mdia", "hdlr", "udta", "meta", "keys", "ilst",
                            "data", "mdat", "iloc", "iinf", "infe", "iprp", "ipco", "ispe", "pitm", "Exif", "MM\0*",
                            "II*\0", "IHDR", "eXIf", "iTXt", "Apple iOS"].map { Array($0.utf8) } + [[0xFF, 0xE1], [0xFF, 0xC0]]

func mutate(_ seeds: [[UInt8]], _ rng: inout SplitMix64) -> [UInt8] {
    var data = seeds[Int(rng.next() % UInt64(seeds.count))]
    let interesting32: [UInt32] = [0, 1, 7, 8, 9, 16, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFE, 0xFFFF_FFFF]
    for _ in 0..<(1 + Int(rng.next() % 8)) {
        guard !data.isEmpty else { break }
        let at = Int(rng.next() % UInt64(data.count))
        switch rng.next() % 10 {
        case 0: data[at] ^= UInt8(1) << (rng.next() % 8)
        case 1: data[at] = [0, 0xFF, 0x7F, 0x80, 1][Int(rng.next() % 5)]
        case 2, 3:  // a 32-bit value, often right before a landmark (a size field)
            var target = at
            if rng.next() % 2 == 0 {
                let mark = landmarks[Int(rng.next() % UInt64(landmarks.count))]
                let hits = positions(of: mark, in: data)
                if !hits.isEmpty { target = max(0, hits[Int(rng.next() % UInt64(hits.count))] - 4 + Int(rng.next() % 3) * 4) }
            }
            let v = interesting32[Int(rng.next() % UInt64(interesting32.count))]
            let bytes = rng.next() % 2 == 0 ? [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
                : [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)]
            for (i, b) in bytes.enumerated() where target + i < data.count { data[target + i] = b }
        case 4: data.removeSubrange(at..<min(data.count, at + 1 + Int(rng.next() % 64)))
        case 5:
            let chunk = Array(data[at..<min(data.count, at + 1 + Int(rng.next() % 256))])
            data.insert(contentsOf: chunk, at: Int(rng.next() % UInt64(data.count)))
        case 6: data.insert(contentsOf: (0..<(1 + rng.next() % 32)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }, at: at)
        case 7: data.removeSubrange(at...)
        case 8:  // splice another seed's tail
            let other = seeds[Int(rng.next() % UInt64(seeds.count))]
            if !other.isEmpty { data = Array(data[..<at]) + other[Int(rng.next() % UInt64(other.count))...] }
        default:
            for i in at..<min(data.count, at + Int(rng.next() % 16)) { data[i] = UInt8(truncatingIfNeeded: rng.next()) }
        }
    }
    return data
}

func positions(of needle: [UInt8], in haystack: [UInt8]) -> [Int] {
    guard haystack.count >= needle.count else { return [] }
    var hits: [Int] = []
    for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] && hits.count < 64 {
        if haystack[i..<i + needle.count].elementsEqual(needle) { hits.append(i) }
    }
    return hits
}

func input(seed: UInt64, iteration: UInt64, seeds: [[UInt8]]) -> [UInt8] {
    var rng = SplitMix64(state: seed ^ (iteration &* 0xD134_2543_DE82_EF95))
    return mutate(seeds, &rng)
}

func write(_ bytes: [UInt8], to path: String) {
    _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
}

func fuzz(seconds: Double, seed: UInt64, out: String, seedPaths: [String], replay: UInt64?) throws -> Int32 {
    try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
    let seeds = try seedPaths.map { [UInt8](try Data(contentsOf: URL(fileURLWithPath: $0))) }
    if let replay {
        write(input(seed: seed, iteration: replay, seeds: seeds), to: out + "/replay")
        print("wrote \(out)/replay (seed \(seed), iteration \(replay))")
        return 0
    }
    let current = out + "/current"
    let fd = open(current, O_CREAT | O_RDWR | O_TRUNC, 0o600)
    guard fd >= 0 else { throw MediaReadError(code: errno, operation: "open \(current)") }
    let iteration = Atomic<UInt64>(0)
    let busy = Atomic<Bool>(false)
    // The watchdog: the same iteration busy for 10 s is a hang.
    Thread.detachNewThread {
        var last: UInt64 = .max, since = ContinuousClock.now
        while true {
            Thread.sleep(forTimeInterval: 0.5)
            let now = iteration.load(ordering: .relaxed)
            if now != last || !busy.load(ordering: .relaxed) { last = now; since = .now; continue }
            if ContinuousClock.now - since > .seconds(10) {
                _ = try? FileManager.default.copyItem(atPath: current, toPath: out + "/hang-\(now)")
                say("HANG at iteration \(now) (seed \(seed)): input kept as \(out)/hang-\(now)")
                exit(2)
            }
        }
    }
    let start = ContinuousClock.now
    var stats = (reads: 0, errors: 0, dated: 0, sized: 0, identified: 0, bytes: 0)
    var i: UInt64 = 0
    let deadline = start + .milliseconds(Int64(seconds * 1000))
    while ContinuousClock.now < deadline {
        let bytes = input(seed: seed, iteration: i, seeds: seeds)
        _ = ftruncate(fd, 0)
        _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        iteration.store(i, ordering: .relaxed)
        busy.store(true, ordering: .relaxed)
        do {
            let facts = try MediaReader.read(fileDescriptor: fd)
            if facts.captured != nil { stats.dated += 1 }
            if facts.width != nil { stats.sized += 1 }
            if facts.contentIdentifier != nil { stats.identified += 1 }
        } catch {
            stats.errors += 1
        }
        busy.store(false, ordering: .relaxed)
        stats.reads += 1
        stats.bytes += bytes.count
        if i % 5000 == 0 { say("iteration \(i): \(stats)") }
        i += 1
    }
    let elapsed = ContinuousClock.now - start
    say("done: seed \(seed), \(i) inputs in \(elapsed) (\(Int(Double(i) / Double(elapsed.components.seconds + 1))) /s), no crash, no hang; \(stats)")
    return 0
}

// MARK: - Main

var arguments = CommandLine.arguments.dropFirst()
do {
    switch arguments.first {
    case "--bench":
        try bench(files(arguments.dropFirst()))
    case "--thumbnail":
        let paths = Array(arguments.dropFirst())
        guard paths.count == 2 else { throw MediaReadError(code: EINVAL, operation: "--thumbnail FILE OUT.png") }
        let fd = open(paths[0], O_RDONLY)
        guard fd >= 0 else { throw MediaReadError(code: errno, operation: "open \(paths[0])") }
        defer { close(fd) }
        guard let png = try Thumbnail.png(fileDescriptor: fd) else { say("no thumbnail for \(paths[0])"); exit(1) }
        FileManager.default.createFile(atPath: paths[1], contents: Data(png))
    case "--fuzz":
        arguments = arguments.dropFirst()
        guard let seconds = arguments.first.flatMap(Double.init) else { throw MediaReadError(code: EINVAL, operation: "--fuzz SECONDS") }
        arguments = arguments.dropFirst()
        var seed: UInt64 = 1, out = NSTemporaryDirectory() + "mediaprobe-fuzz", replay: UInt64?
        while let option = arguments.first, option.hasPrefix("--") {
            arguments = arguments.dropFirst()
            let value = arguments.first ?? ""
            arguments = arguments.dropFirst()
            switch option {
            case "--seed": seed = UInt64(value) ?? 1
            case "--out": out = value
            case "--replay": replay = UInt64(value)
            default: throw MediaReadError(code: EINVAL, operation: "unknown option \(option)")
            }
        }
        exit(try fuzz(seconds: seconds, seed: seed, out: out, seedPaths: files(arguments), replay: replay))
    case nil, "-h", "--help":
        print("usage: mediaprobe FILE… | --bench FILE…|DIR | --fuzz SECONDS [--seed N] [--out DIR] [--replay I] SEED-FILE…")
    default:
        for path in files(arguments) { print(json(try MediaReader.read(path: path), path: path)) }
    }
} catch {
    FileHandle.standardError.write(Data("mediaprobe: \(error)\n".utf8))
    exit(1)
}
