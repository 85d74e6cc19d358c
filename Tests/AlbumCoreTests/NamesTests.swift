import Testing
@testable import AlbumCore

@Suite("Names: (n) forms, truncation, validation")
struct NamesTests {
    // MARK: (n) forms

    @Test("the counter goes before the extension", arguments: [
        ("IMG_1.JPG", 2, "IMG_1 (2).JPG"),
        ("IMG_1.JPG", 3, "IMG_1 (3).JPG"),
        ("IMG_1.JPG", 10, "IMG_1 (10).JPG"),
        ("a.tar.gz", 2, "a.tar (2).gz"),
        (".hidden", 2, ".hidden (2)"),
        (".hidden.jpg", 2, ".hidden (2).jpg"),
        ("README", 2, "README (2)"),
        ("x", 2, "x (2)"),
        ("trailing.", 2, "trailing (2)."),
    ])
    func numberedForms(base: String, n: Int, expected: String) {
        #expect(Names.numbered(name(base), n) == name(expected))
    }

    @Test("a stem of 2-byte characters is shortened at a character boundary")
    func truncatesTwoByteStem() throws {
        // 125 × "é" (250 bytes) + ".jpg" = 254 bytes; " (2)" needs 4 more.
        let stem = String(repeating: "é", count: 125)
        let result = Names.numbered(name(stem + ".jpg"), 2)
        #expect(result.count <= 255)
        #expect(result == name(String(repeating: "é", count: 123) + " (2).jpg"))
        #expect(String(validating: result, as: UTF8.self) != nil)
    }

    @Test("a stem of 3-byte characters is shortened at a character boundary")
    func truncatesThreeByteStem() throws {
        // 83 × "€" (249 bytes) + ".jpg" = 253; room for the stem: 255 − 4 − 4 = 247 → 82 characters.
        let result = Names.numbered(name(String(repeating: "€", count: 83) + ".jpg"), 2)
        #expect(result == name(String(repeating: "€", count: 82) + " (2).jpg"))
    }

    @Test("a stem of 4-byte characters is shortened at a character boundary")
    func truncatesFourByteStem() throws {
        // 62 × "😀" (248 bytes) + ".jpg" = 252; room 247 → 61 characters (244 bytes).
        let result = Names.numbered(name(String(repeating: "😀", count: 62) + ".jpg"), 2)
        #expect(result == name(String(repeating: "😀", count: 61) + " (2).jpg"))
    }

    @Test("a longer counter shortens the stem further")
    func truncatesForLongCounter() throws {
        let base = name(String(repeating: "a", count: 251) + ".jpg")  // 255 bytes
        let result = Names.numbered(base, 123)
        #expect(result.count == 255)
        #expect(result == name(String(repeating: "a", count: 245) + " (123).jpg"))
    }

    @Test("an invalid UTF-8 stem is shortened at a byte")
    func truncatesInvalidStemAtByte() throws {
        let base: Name = [UInt8](repeating: 0xff, count: 251) + name(".jpg")  // 255 bytes
        let result = Names.numbered(base, 2)
        #expect(result.count == 255)
        #expect(result == [UInt8](repeating: 0xff, count: 247) + name(" (2).jpg"))
    }

    @Test("a stem of lone continuation bytes is shortened at a byte")
    func truncatesContinuationBytesAtByte() throws {
        let base: Name = [UInt8](repeating: 0x80, count: 255)
        let result = Names.numbered(base, 2)
        #expect(result == [UInt8](repeating: 0x80, count: 251) + name(" (2)"))
    }

    @Test("a 2-byte lead cut off from its continuation is dropped, a bare lead byte is kept")
    func truncatesMixedStem() throws {
        // 248 × "a", then "é" at bytes 248…249, then ".x" (252 bytes); room for the
        // stem = 255 − 4 − 2 = 249, which would split "é": it goes whole.
        let valid = name(String(repeating: "a", count: 248) + "é" + ".x")
        #expect(Names.numbered(valid, 2) == name(String(repeating: "a", count: 248) + " (2).x"))
        // The same bytes with the continuation byte replaced: 0xC3 followed by "b" is not UTF-8.
        let invalid: Name = name(String(repeating: "a", count: 248)) + [0xC3, 0x62] + name("zz.x")
        let result = Names.numbered(invalid, 2)
        #expect(result.count == 255)
        #expect(result == name(String(repeating: "a", count: 248)) + [0xC3] + name(" (2).x"))
    }

    @Test("names that fit are never shortened")
    func noTruncationWhenItFits() {
        let base = name(String(repeating: "a", count: 247) + ".jpg")  // 251 bytes + 4 = 255
        #expect(Names.numbered(base, 2) == name(String(repeating: "a", count: 247) + " (2).jpg"))
    }

    @Test("an (n) form never passes 255 bytes, even when the extension alone nearly fills the name",
          arguments: [1, 200, 249, 250, 251, 253])
    func longExtensionStaysWithinLimit(extensionLength: Int) throws {
        // "a." followed by a long extension: the stem is one byte, so shortening
        // the stem alone cannot make room for " (2)".
        let base = name("a." + String(repeating: "b", count: extensionLength))
        try Names.validate(base)
        let counters = [2, 3, 9, 10, 11, 99, 100, 1000]
        let forms = counters.map { Names.numbered(base, $0) }
        for (n, form) in zip(counters, forms) {
            #expect(form.count <= Names.maxLength, "\(form.count) bytes for n = \(n)")
        }
        // Every counter gives its own name, none equal to the base (else the
        // search for a free name could not end).
        #expect(Set(forms).count == forms.count, "the (n) forms are not all distinct")
        #expect(!forms.contains(base), "an (n) form equals the name itself")
    }

    // MARK: isSameOrNumbered

    @Test("accepts the name itself and its (n) forms", arguments: [
        ("x", "x"),
        ("x (2)", "x"),
        ("x (3)", "x"),
        ("x (10)", "x"),
        ("IMG_1 (2).JPG", "IMG_1.JPG"),
        ("a.tar (7).gz", "a.tar.gz"),
        (".hidden (2)", ".hidden"),
    ])
    func acceptsNumbered(candidate: String, base: String) {
        #expect(Names.isSameOrNumbered(name(candidate), of: name(base)))
    }

    @Test("rejects shapes that are not (n) forms", arguments: [
        ("x (02)", "x"),
        ("x (1)", "x"),
        ("x (0)", "x"),
        ("x (a)", "x"),
        ("x ()", "x"),
        ("x(2)", "x"),
        ("x  (2)", "x"),
        ("x (2) ", "x"),
        ("x (-2)", "x"),
        ("y (2)", "x"),
        ("x (2).jpg", "x"),
        ("IMG_1.JPG (2)", "IMG_1.JPG"),
        ("IMG_1 (2).jpg", "IMG_1.JPG"),
        ("xx", "x"),
        ("X", "x"),
    ])
    func rejectsNonNumbered(candidate: String, base: String) {
        #expect(!Names.isSameOrNumbered(name(candidate), of: name(base)))
    }

    @Test("accepts the shortened (n) form of a long name")
    func acceptsTruncatedForm() {
        let base = name(String(repeating: "é", count: 125) + ".jpg")
        #expect(Names.isSameOrNumbered(Names.numbered(base, 2), of: base))
        #expect(Names.isSameOrNumbered(Names.numbered(base, 37), of: base))
    }

    @Test("treats invalid UTF-8 names byte for byte")
    func invalidUTF8Numbered() {
        let base: Name = [0xff, 0xfe, 0x2e, 0x6a]  // "\xff\xfe.j"
        let numbered = Names.numbered(base, 2)
        #expect(numbered == [0xff, 0xfe] + name(" (2).j"))
        #expect(Names.isSameOrNumbered(numbered, of: base))
        #expect(!Names.isSameOrNumbered(numbered, of: [0xff, 0xfd, 0x2e, 0x6a]))
    }

    // MARK: validate

    @Test("255 bytes is fine, 256 is too long")
    func validateLength() throws {
        try Names.validate([UInt8](repeating: 0x61, count: 255))
        #expect(throws: LibraryError.nameTooLong) {
            try Names.validate([UInt8](repeating: 0x61, count: 256))
        }
    }

    @Test("slash, NUL, empty, . and .. are invalid", arguments: [
        name("a/b"), name("/"), [0x61, 0x00, 0x62], [0x00], [], name("."), name(".."),
    ])
    func validateInvalid(bad: Name) {
        #expect(throws: LibraryError.invalidArgument) { try Names.validate(bad) }
    }

    @Test("any other bytes are valid", arguments: [
        name("..."), name(".x"), name("a b"), [0xff, 0xfe], name("Ünïcödé"), [0x01, 0x7f, 0x80],
    ])
    func validateValid(good: Name) throws {
        try Names.validate(good)
    }
}
