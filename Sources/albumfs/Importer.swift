import AlbumCore
import AlbumMedia
import Glibc

/// Copies photos and videos into a directory of a mounted library
/// (`Camera Roll/` or an album), one file at a time:
///
/// 1. The file is read once by AlbumMedia (SHA-256 and, from its content,
///    its kind): what is not a photo or a video is skipped, and so is a
///    file whose SHA-256 the library (or this run) already has.
/// 2. It is copied to a side file of the target directory (a name starting
///    with `.`, which albumfs never shows in the roll), its times set and
///    closed; an interrupted copy leaves no partial photo, only that side
///    file, which is removed. (No fsync per file: the command syncs the
///    store's file system once at the end, see ImportCommand.)
/// 3. The side file is renamed to the file's own name with
///    RENAME_NOREPLACE; where a different photo holds that name, to
///    `name (2).ext`, `(3)`, … (a plain rename would replace that photo).
///
/// Ctrl-C is looked at between files and between the chunks of a file.
final class Importer {
    struct SourceFile {
        let path: BytePath
        let size: Int64
        let accessed: timespec
        let modified: timespec
    }

    struct Counts {
        var imported = 0
        var importedBytes: Int64 = 0
        var duplicates = 0
        var other = 0
        var failed = 0
        /// Imported files that may be half of a pair (an Apple content
        /// identifier, a raw): the import waits for their pairing.
        var pairHalves = 0
    }

    /// How the run ended early: Ctrl-C, or a failure of the library itself
    /// (full, read-only, unmounted) that every next file would hit too.
    enum Stop: Error {
        case interrupted
        case library(String)
    }

    /// Not photos to a library, though their content is an image: cameras'
    /// JPEG thumbnails of their videos.
    static let sidecarExtensions: Set<String> = ["thm"]
    static let chunkSize = 1 << 20

    let destination: BytePath
    /// How the destination is named in messages: `Camera Roll`, `Albums/Trips/2024`.
    let destinationLabel: String
    let progress: ImportProgress
    /// SHA-256 → an entry of the library's asset with that content (the
    /// roll's, or the one this run made).
    var known: [String: BytePath]
    /// Importing into an album: a duplicate is added to it (`ln`), as
    /// Photos adds an already imported photo to the album it imports into.
    let intoAlbum: Bool
    private(set) var counts = Counts()
    private let sidePath: BytePath
    private var buffer = [UInt8](repeating: 0, count: Importer.chunkSize)

    init(destination: BytePath, label: String, known: [String: BytePath], intoAlbum: Bool, progress: ImportProgress) {
        self.destination = destination
        self.destinationLabel = label
        self.known = known
        self.intoAlbum = intoAlbum
        self.progress = progress
        self.sidePath = destination.appending(Self.sideName(getpid()))
        removeLeftovers()
    }

    private static let sidePrefix = ".albumfs-import-"
    static func sideName(_ pid: pid_t) -> String { "\(sidePrefix)\(pid).tmp" }

    /// The side files of imports that were killed (SIGKILL, a power cut):
    /// those whose process is gone. Side files never show in the roll, but
    /// they take space and show in `ls -a` of their directory.
    private func removeLeftovers() {
        guard case .success(let names) = destination.directoryEntries() else { return }
        for name in names where name.starts(with: Array(Self.sidePrefix.utf8)) {
            let text = String(decoding: name, as: UTF8.self)
            guard let pid = pid_t(text.dropFirst(Self.sidePrefix.count).dropLast(4)), text == Self.sideName(pid) else { continue }
            if pid == getpid() || (kill(pid, 0) != 0 && errno == ESRCH) {
                destination.appending(name).withCString { _ = unlink($0) }
            }
        }
    }

    // MARK: the files to import

    /// Every regular file under the sources, sorted by path; hidden files
    /// and directories (names starting with `.`: thumbnail caches,
    /// AppleDouble, trash) are not entered, nor is any directory on the
    /// library's own file system (`excludingDevice`), nor symbolic links.
    static func walk(_ sources: [BytePath], excludingDevice: UInt64, failures: inout [String]) -> [SourceFile] {
        var files: [SourceFile] = []
        func visit(_ path: BytePath, _ info: stat, top: Bool) {
            switch info.st_mode & S_IFMT {
            case S_IFREG:
                files.append(SourceFile(path: path, size: Int64(info.st_size), accessed: info.st_atim, modified: info.st_mtim))
            case S_IFDIR:
                guard UInt64(info.st_dev) != excludingDevice else {
                    if top { failures.append("\(path): is in the library itself") }
                    return
                }
                switch path.directoryEntries() {
                case .failure(let error): failures.append("\(path): \(error)")
                case .success(let names):
                    for name in names.sorted(by: { $0.lexicographicallyPrecedes($1) }) where name.first != UInt8(ascii: ".") {
                        let child = path.appending(name)
                        if let childInfo = child.status() { visit(child, childInfo, top: false) }
                    }
                }
            default:
                if top { failures.append("\(path): not a regular file or a directory") }
            }
        }
        for source in sources {
            guard let info = source.status(followingLinks: true) else {
                failures.append("\(source): \(SystemError("stat"))")
                continue
            }
            visit(source, info, top: true)
        }
        return files
    }

    // MARK: importing

    /// Imports `files` in order; throws when it had to stop early.
    func run(_ files: [SourceFile]) throws(Stop) {
        for file in files {
            if Interruption.received != nil { throw .interrupted }
            try importFile(file)
        }
    }

    private func importFile(_ file: SourceFile) throws(Stop) {
        let source = file.path.withCString { open($0, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) }
        guard source >= 0 else { return failed(file, "\(SystemError("open"))") }
        defer { close(source) }
        let facts: MediaFacts
        do {
            facts = try MediaReader.read(fileDescriptor: source)
        } catch {
            return failed(file, "\(error)")
        }
        let name = file.path.name
        let fileExtension = String(decoding: name.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).last ?? [], as: UTF8.self).lowercased()
        guard !Self.sidecarExtensions.contains(fileExtension) else {
            counts.other += 1
            return progress.finished("skipped \(file.path): a camera's thumbnail of a video", bytes: file.size)
        }
        guard facts.kind == .photo || facts.kind == .video else {
            counts.other += 1
            return progress.finished("skipped \(file.path): not a photo or video (\(facts.type ?? "unknown type"))", bytes: file.size)
        }
        guard !Names.isSideFileName(name) else {
            counts.other += 1
            return progress.finished("skipped \(file.path): a temporary file by its name", bytes: file.size)
        }
        if let existing = known[facts.sha256] {
            var line = "duplicate \(file.path): already in the library (SHA-256 \(facts.sha256.prefix(12)))"
            if intoAlbum {
                do throws(CopyFailure) {
                    if let added = try link(existing, as: name) {
                        line += "; added to \(destinationLabel)/\(String(decoding: added, as: UTF8.self))"
                    }
                } catch {
                    // Not where it was asked for: a failure (exit 1), not a duplicate.
                    return failed(file, "already in the library, but not added to \(destinationLabel): \(error)")
                }
            }
            counts.duplicates += 1
            return progress.finished(line, bytes: file.size)
        }
        let given: [UInt8]
        do throws(CopyFailure) {
            given = try copy(source, file)
        } catch {
            switch error {
            case .interrupted: throw .interrupted
            case .file(let message): return failed(file, message)
            case .library(let message):
                failed(file, message)
                throw .library(message)
            }
        }
        known[facts.sha256] = destination.appending(given)
        if facts.contentIdentifier != nil || facts.isRaw { counts.pairHalves += 1 }
        counts.imported += 1
        counts.importedBytes += file.size
        progress.finished("imported \(file.path) -> \(destinationLabel)/\(String(decoding: given, as: UTF8.self))", bytes: file.size)
    }

    private func failed(_ file: SourceFile, _ message: String) {
        counts.failed += 1
        progress.finished("failed \(file.path): \(message)", bytes: file.size, always: true, toStandardError: true)
    }

    private enum CopyFailure: Error, CustomStringConvertible {
        case interrupted
        /// This file only (its source could not be read).
        case file(String)
        /// The library: every next file would fail too.
        case library(String)

        var description: String {
            switch self {
            case .interrupted: return "interrupted"
            case .file(let message), .library(let message): return message
            }
        }
    }

    /// Copies into the side file, then renames it to a free name; returns that name.
    private func copy(_ source: Int32, _ file: SourceFile) throws(CopyFailure) -> [UInt8] {
        let target = sidePath.withCString { open($0, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644) }
        guard target >= 0 else { throw .library("\(sidePath): \(SystemError("open"))") }
        var isOpen = true
        do throws(CopyFailure) {
            try copyData(source, to: target)
            var times = [file.accessed, file.modified]
            guard futimens(target, &times) == 0 else { throw .library("\(SystemError("futimens"))") }
            isOpen = false
            guard close(target) == 0 else { throw .library("\(SystemError("close"))") }
            return try renameToFreeName(file.path.name)
        } catch {
            if isOpen { close(target) }
            sidePath.withCString { _ = unlink($0) }
            throw error
        }
    }

    private func copyData(_ source: Int32, to target: Int32) throws(CopyFailure) {
        var copied: Int64 = 0
        while true {
            if Interruption.received != nil { throw .interrupted }
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .file("\(SystemError("read"))")
            }
            if count == 0 { return }
            var offset = 0
            while offset < count {
                let written = buffer.withUnsafeBytes { write(target, $0.baseAddress! + offset, count - offset) }
                if written < 0 {
                    if errno == EINTR { continue }
                    throw .library("\(SystemError("write"))")
                }
                offset += written
            }
            copied += Int64(count)
            progress.copying(copied)
        }
    }

    /// Adds the asset at `existing` to the destination album under `name`
    /// (or its first free `(n)` form); nil when the album holds it already.
    private func link(_ existing: BytePath, as name: [UInt8]) throws(CopyFailure) -> [UInt8]? {
        guard let asset = existing.status() else { throw .library("\(existing): \(SystemError("stat"))") }
        for n in 1...100_000 {
            let candidate = n == 1 ? name : Names.numbered(name, n)
            let target = destination.appending(candidate)
            let rc = existing.withCString { from in target.withCString { to in Glibc.link(from, to) } }
            if rc == 0 { return candidate }
            guard errno == EEXIST else { throw .library("ln \(existing) \(target): \(SystemError("link"))") }
            // EEXIST: the name is taken, or the album holds the asset under another name.
            guard let holder = target.status(), holder.st_ino != asset.st_ino else { return nil }
        }
        throw .library("no free name for \(String(decoding: name, as: UTF8.self)) in \(destination)")
    }

    /// `name`, else the first free `name (n)` (the daemon's own `(n)` rule).
    private func renameToFreeName(_ name: [UInt8]) throws(CopyFailure) -> [UInt8] {
        for n in 1...100_000 {
            let candidate = n == 1 ? name : Names.numbered(name, n)
            let rc = sidePath.withCString { from in
                destination.appending(candidate).withCString { to in
                    systemRenameat2(AT_FDCWD, from, AT_FDCWD, to, renameNoReplace)
                }
            }
            if rc == 0 { return candidate }
            guard errno == EEXIST else { throw .library("rename to \(destination.appending(candidate)): \(SystemError("rename"))") }
        }
        throw .library("no free name for \(String(decoding: name, as: UTF8.self)) in \(destination)")
    }
}
