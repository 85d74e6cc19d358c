#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import AlbumCore

/// A fresh store in its own temporary directory, with a `Library` open on it.
/// The directory is removed when the value goes away, so every test that makes
/// one cleans up after itself.
final class TestStore {
    static let owner = Caller(uid: 1000, gid: 1000)
    static let roll = FixedNode.cameraRoll
    static let albums = FixedNode.albumsRoot
    static let root = FixedNode.root

    /// The temporary directory (the store is `directory/store`).
    let directory: String
    let location: StoreLocation
    /// The open library; nil after `close()`.
    private(set) var openLibrary: Library?

    /// The library's options (every reopen uses them too).
    let options: LibraryOptions

    init(openLibrary open: Bool = true, options: LibraryOptions = LibraryOptions()) throws {
        self.options = options
        var template = Array("/tmp/albumfs-unit-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw LibraryError.io(errno)
        }
        directory = String(cString: made)
        location = StoreLocation(path: directory + "/store")
        if open {
            openLibrary = try Library(location: location, owner: Self.owner, create: true, options: options)
        }
    }

    deinit {
        openLibrary = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    var library: Library {
        guard let openLibrary else { fatalError("the test store's library is closed") }
        return openLibrary
    }

    /// Drops the library (closing its database connection), once it has read
    /// the facts of what it was given (so it closes on this thread).
    func close() {
        _ = openLibrary?.waitForIndexing(timeout: 10)
        openLibrary = nil
    }

    /// Closes the library and opens a new one on the same store, as a remount does.
    @discardableResult
    func reopen(owner: Caller = TestStore.owner, options: LibraryOptions? = nil) throws -> Library {
        close()
        let library = try Library(location: location, owner: owner, options: options ?? self.options)
        openLibrary = library
        return library
    }

    // MARK: entries

    @discardableResult
    func createFile(_ parent: NodeID, _ name: String, mode: UInt32 = 0o644, contents: [UInt8]? = nil) throws -> NodeID {
        try createFile(parent, Array(name.utf8), mode: mode, contents: contents)
    }

    @discardableResult
    func createFile(_ parent: NodeID, _ name: Name, mode: UInt32 = 0o644, contents: [UInt8]? = nil) throws -> NodeID {
        let (attributes, _) = try library.createAsset(in: parent, named: name, mode: mode, by: Self.owner)
        if let contents { try write(attributes.id, contents) }
        return attributes.id
    }

    /// A new album in `Albums/`.
    @discardableResult
    func makeAlbum(_ name: String, mode: UInt32 = 0o755) throws -> NodeID {
        try makeAlbum(Self.albums, name, mode: mode)
    }

    @discardableResult
    func makeAlbum(_ parent: NodeID, _ name: String, mode: UInt32 = 0o755) throws -> NodeID {
        try library.makeAlbum(in: parent, named: Array(name.utf8), mode: mode, by: Self.owner).id
    }

    /// The id behind `parent/name`, or nil when there is no such entry.
    func id(_ parent: NodeID, _ name: String) throws -> NodeID? {
        try id(parent, Array(name.utf8))
    }

    func id(_ parent: NodeID, _ name: Name) throws -> NodeID? {
        do {
            return try library.lookup(parent, name).id
        } catch LibraryError.notFound {
            return nil
        }
    }

    /// Every entry name of a directory, in listing order.
    func names(_ directory: NodeID) throws -> [Name] {
        try library.list(directory, after: 0, limit: 100_000).map(\.name)
    }

    /// Every entry name of a directory as text, sorted (for comparisons).
    func sortedNames(_ directory: NodeID) throws -> [String] {
        try names(directory).map { String(decoding: $0, as: UTF8.self) }.sorted()
    }

    /// The name under which `directory` shows `asset`, if any.
    func name(of asset: NodeID, in directory: NodeID) throws -> String? {
        try library.list(directory, after: 0, limit: 100_000)
            .first { $0.attributes.id == asset }
            .map { String(decoding: $0.name, as: UTF8.self) }
    }

    func exists(_ id: NodeID) -> Bool {
        do {
            _ = try library.attributes(of: id)
            return true
        } catch {
            return false
        }
    }

    // MARK: data

    /// The size of an asset's content file (nil: none) as `df` sees it: once
    /// the data of every purge so far is freed (they are freed after the reply).
    func dataSize(of id: NodeID) -> Int64? {
        library.waitForFreedData()
        return library.content.size(of: id)
    }

    /// open → write → flush → release, as `cp` does.
    func write(_ id: NodeID, _ bytes: [UInt8], at offset: Int64 = 0) throws {
        let file = try library.open(id, writable: true, truncate: false)
        if !bytes.isEmpty {
            let written = try bytes.withUnsafeBytes { raw in
                try library.write(file, from: raw.baseAddress!, count: raw.count, at: offset)
            }
            #expect(written == bytes.count)
        }
        try library.flush(file)
        try library.release(file)
    }

    /// The whole content of an asset, read through an open file.
    func read(_ id: NodeID) throws -> [UInt8] {
        let size = Int(try library.attributes(of: id).size)
        let file = try library.open(id, writable: false, truncate: false)
        defer { try? library.release(file) }
        var buffer = [UInt8](repeating: 0, count: size + 16)
        var total = 0
        while total < buffer.count {
            let n = try buffer.withUnsafeMutableBytes { raw in
                try library.read(file, into: raw.baseAddress! + total, count: raw.count - total, at: Int64(total))
            }
            if n == 0 { break }
            total += n
        }
        return Array(buffer[..<total])
    }
}

extension LibraryOptions {
    /// trash_days=0: a delete from the roll frees the asset at once.
    static let purgeAtOnce = LibraryOptions(trashDays: 0)
}

/// A name from text.
func name(_ s: String) -> Name { Array(s.utf8) }

/// Some recognisable bytes.
func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// Whether a file or directory exists at `path`.
func pathExists(_ path: String) -> Bool {
    var info = stat()
    return lstat(path, &info) == 0
}
