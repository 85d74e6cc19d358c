import Foundation
import Testing
@testable import AlbumMedia

@Suite("MediaReader on media made by exiftool, heif-enc, ffmpeg")
struct MediaReaderTests {
    @Test("each file's facts equal what exiftool, ffprobe and sha256sum say", arguments: MediaFixtures.names)
    func factsMatchTheTools(name: String) throws {
        let media = try MediaFixtures.get()
        let expected = try #require(media.expected[name], "expected.json has no \(name)")
        let facts = try MediaReader.read(path: media.directory + "/" + name)
        #expect(facts.sha256 == expected.facts.sha256)
        #expect(facts.type == expected.facts.type)
        #expect(facts.kind == expected.facts.kind)
        #expect(facts.captured == expected.facts.captured)
        #expect(facts.width == expected.facts.width)
        #expect(facts.height == expected.facts.height)
        #expect(facts.location == expected.facts.location)
        #expect(facts.contentIdentifier == expected.facts.contentIdentifier)
        #expect(facts.isScreenshot == expected.facts.isScreenshot)
        #expect(facts.isRaw == expected.facts.isRaw)
        #expect(facts.byteCount == expected.facts.byteCount)
        if let duration = expected.facts.duration {
            let got = try #require(facts.duration)
            #expect(abs(got - duration) < 0.001)
            if let probed = expected.ffprobeDuration { #expect(abs(got - probed) < 0.1) }
        } else {
            #expect(facts.duration == nil)
        }
    }

    @Test("the Live Photo's still and video carry the same content identifier")
    func livePhotoPair() throws {
        let media = try MediaFixtures.get()
        let still = try MediaReader.read(path: media.directory + "/live.jpg")
        let video = try MediaReader.read(path: media.directory + "/live.mov")
        #expect(still.contentIdentifier != nil)
        #expect(still.contentIdentifier == video.contentIdentifier)
    }

    @Test("read(fileDescriptor:) uses pread only: the offset stays, the descriptor stays open")
    func descriptorUntouched() throws {
        let media = try MediaFixtures.get()
        let fd = open(media.directory + "/live.mov", O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        #expect(lseek(fd, 1234, SEEK_SET) == 1234)
        let facts = try MediaReader.read(fileDescriptor: fd)
        #expect(lseek(fd, 0, SEEK_CUR) == 1234)
        #expect(fcntl(fd, F_GETFD) != -1)
        #expect(try MediaReader.hashOnly(fileDescriptor: fd) == facts.sha256)
        #expect(lseek(fd, 0, SEEK_CUR) == 1234)
    }

    @Test("a missing file, a directory and a FIFO throw; they do not hang")
    func ioErrors() throws {
        #expect(throws: MediaReadError.self) { try MediaReader.read(path: "/nonexistent/albumfs-media") }
        let dir = NSTemporaryDirectory() + "albumfs-media-io-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(throws: MediaReadError(code: EINVAL, operation: "not a regular file")) { try MediaReader.read(path: dir) }
        let fifo = dir + "/fifo"
        try #require(mkfifo(fifo, 0o600) == 0)
        #expect(throws: MediaReadError(code: EINVAL, operation: "not a regular file")) { try MediaReader.read(path: fifo) }
    }

    @Test("a failing pread is thrown with its errno, not taken for the end of the file")
    func readErrorThrown() throws {
        let media = try MediaFixtures.get()
        let fd = open(media.directory + "/live.jpg", O_WRONLY)  // pread on it: EBADF
        try #require(fd >= 0)
        defer { close(fd) }
        #expect(throws: MediaReadError(code: EBADF, operation: "pread")) { try MediaReader.read(fileDescriptor: fd) }
        #expect(throws: MediaReadError(code: EBADF, operation: "pread")) { try MediaReader.hashOnly(fileDescriptor: fd) }
    }

    @Test("an empty file has the SHA-256 of nothing and no other facts")
    func emptyFile() throws {
        let path = NSTemporaryDirectory() + "albumfs-media-empty-\(getpid())"
        _ = FileManager.default.createFile(atPath: path, contents: Data())
        defer { unlink(path) }
        let facts = try MediaReader.read(path: path)
        #expect(facts.sha256 == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(facts.kind == .other)
        #expect(facts.byteCount == 0)
        #expect(facts.captured == nil && facts.width == nil && facts.duration == nil)
    }
}

@Suite("MediaReader from many threads at once")
struct ConcurrentReadTests {
    @Test("eight threads reading every file give what one thread gives")
    func concurrentReads() async throws {
        let media = try MediaFixtures.get()
        let paths = MediaFixtures.names.map { media.directory + "/" + $0 }
        let alone = try paths.map { try MediaReader.read(path: $0) }
        try await withThrowingTaskGroup(of: [MediaFacts].self) { group in
            for _ in 0..<8 {
                group.addTask { try (0..<10).flatMap { _ in try paths.map { try MediaReader.read(path: $0) } } }
            }
            for try await results in group {
                #expect(results == Array((0..<10).flatMap { _ in alone }))
            }
        }
    }
}
