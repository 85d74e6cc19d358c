// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "albumfs",
    products: [
        .executable(name: "albumfs", targets: ["albumfs"]),
    ],
    targets: [
        .systemLibrary(
            name: "CFuse3",
            pkgConfig: "fuse3",
            providers: [.apt(["libfuse3-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite3",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        // A small SQLite wrapper with no domain words in it.
        .target(name: "SQLiteKit", dependencies: ["CSQLite3"]),
        // The library model and the on-disk store. No FUSE: testable alone.
        .target(name: "AlbumCore", dependencies: ["SQLiteKit"]),
        // The thin FUSE low-level adapter over AlbumCore.
        .target(name: "AlbumFUSE", dependencies: ["AlbumCore", "CFuse3"]),
        // The command-line entry point: one type per subcommand.
        .executableTarget(name: "albumfs", dependencies: ["AlbumCore", "AlbumFUSE", "CSystemd"]),
        .testTarget(name: "SQLiteKitTests", dependencies: ["SQLiteKit"]),
        .testTarget(name: "AlbumCoreTests", dependencies: ["AlbumCore", "SQLiteKit"]),
    ]
)
