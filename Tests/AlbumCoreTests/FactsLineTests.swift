import Testing
@testable import AlbumCore

/// The facts worker's answer line (AssetFacts+Line.swift): one line of
/// twelve tab-separated fields (the last a thumbnail's PNG in hex), whatever
/// the file's strings hold.
@Suite("The facts line between the worker and the daemon")
struct FactsLineTests {
    private let sha = String(repeating: "ab", count: 32)

    @Test("facts round-trip, fields with tabs, line breaks, CRLF, % and non-ASCII included")
    func roundTrip() {
        let odd = ["", "plain", "%", "%09", "%%0A%", "a\tb", "line\nbreak", "carriage\rreturn", "crlf\r\nend", "é📷", "%2", "100%"]
        for text in odd {
            let facts = AssetFacts(sha256: sha, type: "image/\(text)", kind: .photo, captured: "2024-05-01T10:00:00+02:00",
                                   width: 4032, height: 3024, duration: 1.5, location: text.isEmpty ? nil : text,
                                   contentIdentifier: "id-\(text)", isScreenshot: true, isRaw: false,
                                   thumbnail: text.isEmpty ? nil : Array(text.utf8) + [0, 9, 10, 13, 255])
            let line = facts.line
            // The line protocol: one line, twelve fields.
            #expect(!line.utf8.contains(UInt8(ascii: "\n")) && !line.utf8.contains(UInt8(ascii: "\r")), "\(text.debugDescription)")
            #expect(line.utf8.filter { $0 == UInt8(ascii: "\t") }.count == 11, "\(text.debugDescription)")
            #expect(AssetFacts(line: line) == facts, "\(text.debugDescription)")
        }
    }

    @Test("the format: fields in their order, empty for none, escapes as written")
    func format() {
        let facts = AssetFacts(sha256: sha, type: "image/jpeg", kind: .photo, location: "+48.8566+002.3522/", contentIdentifier: "a%b\tc")
        #expect(facts.line == "\(sha)\timage/jpeg\tphoto\t\t\t\t\t+48.8566+002.3522/\ta%25b%09c\t0\t0\t")
        #expect(AssetFacts(line: "\(sha)\t\tvideo\t\t\t\t12.5\t\t\t0\t1\t")
                == AssetFacts(sha256: sha, kind: .video, duration: 12.5, isRaw: true))
        var photo = facts
        photo.thumbnail = [0x89, 0x50, 0x00, 0xff]
        #expect(photo.line.hasSuffix("\t0\t0\t895000ff"))
    }

    @Test("what is not a facts line: nil")
    func notALine() {
        #expect(AssetFacts(line: "") == nil)
        #expect(AssetFacts(line: "!5") == nil)
        #expect(AssetFacts(line: "abc\t\tphoto\t\t\t\t\t\t\t0\t0") == nil)                  // not a SHA-256
        #expect(AssetFacts(line: "\(sha)\t\tphoto\t\t\t\t\t\t0\t0") == nil)                // ten fields
        #expect(AssetFacts(line: "\(sha)\t\tphoto\t\t\t\t\t\t\t0\t0") == nil)              // eleven (an older worker)
        #expect(AssetFacts(line: "\(sha)\t\tphoto\t\t\t\t\t\t\t0\t0\t0g") == nil)         // a thumbnail not in hex
        #expect(AssetFacts(line: "\(sha)\t\tphoto\t\t\t\t\t\t\t0\t0\tabc") == nil)        // an odd count of digits
    }
}
