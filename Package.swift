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
        .systemLibrary(
            name: "CMagic",
            pkgConfig: "libmagic",
            providers: [.apt(["libmagic-dev"])]
        ),
        .systemLibrary(
            name: "CExif",
            pkgConfig: "libexif",
            providers: [.apt(["libexif-dev"])]
        ),
        .systemLibrary(
            name: "CHeif",
            pkgConfig: "libheif",
            providers: [.apt(["libheif-dev"])]
        ),
        .systemLibrary(
            name: "CTurboJPEG",
            pkgConfig: "libturbojpeg",
            providers: [.apt(["libturbojpeg0-dev"])]
        ),
        .systemLibrary(
            name: "CPNG",
            pkgConfig: "libpng16",
            providers: [.apt(["libpng-dev"])]
        ),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CZstd",
            pkgConfig: "libzstd",
            providers: [.apt(["libzstd-dev"])]
        ),
        .systemLibrary(
            name: "CURing",
            pkgConfig: "liburing",
            providers: [.apt(["liburing-dev"])]
        ),
        // FUSE over io_uring for libfuse 3.14's session (C: it lays requests out as libfuse reads them).
        .target(name: "FuseRing", dependencies: ["CFuse3", "CURing"]),
        // getxattr(2) and friends (libc's; Swift's Glibc module leaves them out).
        .systemLibrary(name: "CXattr"),
        // Whole files compressed with zstd (the metadata snapshots in the bucket).
        .target(name: "Zstd", dependencies: ["CZstd"]),
        // What a file says about itself: SHA-256, MIME type, capture date,
        // size, place, Live Photo id. Pure: no store, no FUSE.
        // SHA-256 and HMAC over libcrypto, for AlbumMedia and ObjectStore alike.
        .target(name: "Digests", dependencies: ["CCrypto"]),
        .target(name: "AlbumMedia", dependencies: ["CMagic", "CExif", "CHeif", "CTurboJPEG", "CPNG", "Digests"]),
        // A developer's tool over AlbumMedia: facts as JSON, a benchmark, the fuzz loop.
        .executableTarget(name: "mediaprobe", dependencies: ["AlbumMedia"]),
        // An S3 client (SigV4 signing, libcurl): the object store originals live in. No store, no FUSE.
        .target(name: "ObjectStore", dependencies: ["CCurl", "Digests"]),
        // A small SQLite wrapper with no domain words in it.
        .target(name: "SQLiteKit", dependencies: ["CSQLite3"]),
        // The library model and the on-disk store (Digests: it checks what the bucket gives back). No FUSE: testable alone.
        .target(name: "AlbumCore", dependencies: ["SQLiteKit", "Digests", "Zstd", "CXattr"]),
        // The thin FUSE low-level adapter over AlbumCore.
        .target(name: "AlbumFUSE", dependencies: ["AlbumCore", "CFuse3", "FuseRing"]),
        // The command-line entry point: one type per subcommand.
        .executableTarget(name: "albumfs", dependencies: ["AlbumCore", "AlbumFUSE", "AlbumMedia", "ObjectStore", "CSystemd"]),
        .testTarget(name: "SQLiteKitTests", dependencies: ["SQLiteKit"]),
        .testTarget(name: "AlbumCoreTests", dependencies: ["AlbumCore", "SQLiteKit", "ObjectStore", "Zstd"]),
        .testTarget(name: "AlbumMediaTests", dependencies: ["AlbumMedia"]),
        .testTarget(name: "ObjectStoreTests", dependencies: ["ObjectStore", "Digests"]),
    ]
)
