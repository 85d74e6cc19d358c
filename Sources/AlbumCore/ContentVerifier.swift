#if canImport(Glibc)
import Glibc
#endif
import SQLiteKit

/// `albumfs fsck --verify`: re-reads every content file whose SHA-256 is on
/// record and reports those that no longer match (bit rot, a file changed
/// behind albumfs' back), changing nothing. Run on a store no daemon holds
/// for writing, like fsck.
public struct ContentVerifier {
    public struct Mismatch: Sendable, CustomStringConvertible {
        public let asset: NodeID
        /// Its roll name (or Recently Deleted name), for the report.
        public let name: String
        public let recorded: String
        /// nil: the content file cannot be read.
        public let actual: String?

        public var description: String {
            if let actual {
                return "asset \(asset) (\(name)): content changed: SHA-256 \(actual), recorded \(recorded)"
            }
            return "asset \(asset) (\(name)): content file cannot be read"
        }
    }

    public let location: StoreLocation
    public let reader: any AssetFactsReader

    public init(location: StoreLocation, reader: any AssetFactsReader) {
        self.location = location
        self.reader = reader
    }

    /// `progress(done, total, bytes)` after each file.
    public func verify(progress: (Int, Int, Int64) -> Void = { _, _, _ in }) throws(LibraryError) -> [Mismatch] {
        let lock: StoreLock?
        do {
            lock = try StoreLock(location: location)
        } catch {
            guard StoreLock.holderMode(location) == .readOnly else {
                throw .unusableStore("the store \(location.root) is mounted; unmount it first (a read-only mount can be verified)")
            }
            lock = nil
        }
        defer { withExtendedLifetime(lock) {} }
        let content = ContentStore(directory: location.contentPath)
        do {
            let db = try Database(path: location.databasePath, mode: .readOnly)
            let recorded = try db.recordedSHA256s()
            var mismatches: [Mismatch] = []
            var bytes: Int64 = 0
            // Evicted data is in the bucket, verified whenever it is fetched.
            let evicted = Set(try db.evictedAssets())
            for (index, (asset, sha256)) in recorded.enumerated() where !evicted.contains(asset) {
                var actual: String?
                if let descriptor = try? content.open(asset, writable: false) {
                    actual = try? reader.sha256(ofFileAt: descriptor)
                    var info = stat()
                    if fstat(descriptor, &info) == 0 { bytes += Int64(info.st_size) }
                    close(descriptor)
                }
                if actual != sha256 {
                    let name = try db.name(of: asset, in: FixedNode.cameraRoll) ?? db.name(of: asset, in: FixedNode.recentlyDeleted) ?? []
                    mismatches.append(Mismatch(asset: asset, name: String(decoding: name, as: UTF8.self), recorded: sha256, actual: actual))
                }
                progress(index + 1, recorded.count, bytes)
            }
            return mismatches
        } catch let error as LibraryError {
            throw error
        } catch let error as SQLiteError {
            throw .unusableStore("cannot read the store's database: \(error.message)")
        } catch {
            throw .unusableStore("cannot verify the store: \(error)")
        }
    }
}
