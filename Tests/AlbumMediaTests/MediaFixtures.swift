import Foundation
import Testing
@testable import AlbumMedia

/// The test media, made once per test run by Tests/media/make-media with the
/// real tools (ImageMagick, exiftool, heif-enc, ffmpeg), and what exiftool,
/// ffprobe and sha256sum say of each file (expected.json).
enum MediaFixtures {
    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("media/make-media").path

    struct Made: Sendable {
        let directory: String
        let expected: [String: Expected]
    }

    /// One file's entry in expected.json.
    struct Expected: Sendable {
        var facts: MediaFacts
        var ffprobeDuration: Double?

        init(_ json: [String: Any]) {
            func text(_ key: String) -> String? { json[key] as? String }
            func number(_ key: String) -> Double? { (json[key] as? NSNumber)?.doubleValue }
            func flag(_ key: String) -> Bool { (json[key] as? NSNumber)?.boolValue ?? false }
            facts = MediaFacts(
                sha256: text("sha256") ?? "", type: text("type"), kind: MediaKind(rawValue: text("kind") ?? "") ?? .other,
                captured: text("captured"), width: number("width").map { Int($0) }, height: number("height").map { Int($0) },
                duration: number("duration"), location: text("location"), contentIdentifier: text("contentIdentifier"),
                isScreenshot: flag("isScreenshot"), isRaw: flag("isRaw"), byteCount: Int64(number("size") ?? -1))
            ffprobeDuration = number("ffprobeDuration")
        }
    }

    /// Where the media are made; removed when the test process exits.
    static let directory = NSTemporaryDirectory() + "albumfs-media-\(getpid())"

    static let made: Result<Made, MediaFixtureError> = {
        atexit { try? FileManager.default.removeItem(atPath: MediaFixtures.directory) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: script)
        process.arguments = [directory]
        let errors = Pipe()
        process.standardError = errors
        do {
            try process.run()
        } catch {
            return .failure(MediaFixtureError(message: "cannot run \(script): \(error)"))
        }
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            return .failure(MediaFixtureError(message: "make-media failed (\(process.terminationStatus)): \(message)"))
        }
        guard let data = FileManager.default.contents(atPath: directory + "/expected.json"),
              let json = try? JSONSerialization.jsonObject(with: data) as? [String: [String: Any]] else {
            return .failure(MediaFixtureError(message: "no expected.json in \(directory)"))
        }
        var expected: [String: Expected] = [:]
        for (name, facts) in json {
            expected[name] = Expected(facts)
        }
        return .success(Made(directory: directory, expected: expected))
    }()

    /// The media directory, or a recorded failure: missing tools fail the
    /// tests, they do not skip them.
    static func get() throws -> Made { try made.get() }

    static let names = ["live.jpg", "live.mov", "clip.mp4", "photo.heic", "live2.heic", "live2.mov", "raw.dng",
                        "screenshot.png", "screenshot-xmp.png", "sound.m4a", "nodate.jpg", "notes.txt"]
}

struct MediaFixtureError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
