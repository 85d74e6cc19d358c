/// Named, never-edited schema steps, applied in order. Each runs in its own
/// immediate transaction and bumps `PRAGMA user_version`, so a crash between
/// two steps leaves a database at a well-defined version.
public struct Migrator: Sendable {
    public struct Migration: Sendable {
        public let name: String
        public let apply: @Sendable (Database) throws -> Void
        public init(_ name: String, apply: @escaping @Sendable (Database) throws -> Void) {
            self.name = name
            self.apply = apply
        }
    }

    public let migrations: [Migration]
    public init(_ migrations: [Migration]) { self.migrations = migrations }

    /// The version a fully migrated database has.
    public var latestVersion: Int { migrations.count }

    public enum Outcome: Equatable {
        case upToDate
        case migrated(from: Int, to: Int)
        case newerThanSupported(found: Int, supported: Int)
    }

    public static func version(of db: Database) throws -> Int {
        Int(try db.scalarInt("PRAGMA user_version"))
    }

    /// Applies every step the database has not had yet. A database from a newer
    /// format is left untouched and reported.
    public func migrate(_ db: Database) throws -> Outcome {
        let found = try Self.version(of: db)
        if found > latestVersion { return .newerThanSupported(found: found, supported: latestVersion) }
        if found == latestVersion { return .upToDate }
        for index in found..<latestVersion {
            try db.transaction {
                try migrations[index].apply(db)
                try db.execute("PRAGMA user_version = \(index + 1)")
            }
        }
        return .migrated(from: found, to: latestVersion)
    }
}
