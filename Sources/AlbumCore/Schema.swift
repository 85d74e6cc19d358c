import SQLiteKit

/// The store's schema, as migration steps. Steps are never edited once
/// released: a change is a new step.
enum Schema {
    static let migrator = Migrator([
        .init("create nodes, entries and xattrs") { db in
            try db.execute("""
                CREATE TABLE nodes(
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    kind INTEGER NOT NULL,
                    -- Directories only: the one directory that holds this one.
                    parent INTEGER REFERENCES nodes(id),
                    mode INTEGER NOT NULL,
                    uid INTEGER NOT NULL,
                    gid INTEGER NOT NULL,
                    size INTEGER NOT NULL DEFAULT 0,
                    atime INTEGER NOT NULL,
                    mtime INTEGER NOT NULL,
                    ctime INTEGER NOT NULL,
                    imported INTEGER NOT NULL
                );
                -- (parent, name) -> child. The roll, albums and the fixed
                -- directories all live here; an album has exactly one entry.
                CREATE TABLE entries(
                    parent INTEGER NOT NULL REFERENCES nodes(id),
                    name BLOB NOT NULL,
                    child INTEGER NOT NULL REFERENCES nodes(id),
                    PRIMARY KEY(parent, name)
                );
                -- Listing order is rowid order, so readdir cookies survive renames.
                CREATE INDEX entries_by_parent ON entries(parent);
                -- A directory holds an asset at most once.
                CREATE UNIQUE INDEX entries_by_child ON entries(child, parent);
                CREATE INDEX nodes_by_parent ON nodes(parent) WHERE parent IS NOT NULL;
                CREATE TABLE xattrs(
                    node INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
                    name BLOB NOT NULL,
                    value BLOB NOT NULL,
                    PRIMARY KEY(node, name)
                ) WITHOUT ROWID;
                """)
        },
        .init("crash recovery: unfinished writes and pending purges") { db in
            try db.execute("""
                -- Assets whose data may be ahead of their row (created or opened
                -- for writing and not yet released): the next mount sets their
                -- size from their data.
                CREATE TABLE unfinished_writes(id INTEGER PRIMARY KEY);
                -- Assets deleted whose data is still to be freed: the deletion
                -- commits first, the data goes after, and the next mount finishes
                -- what a crash interrupted.
                CREATE TABLE pending_purges(id INTEGER PRIMARY KEY);
                """)
        },
        .init("recently deleted and the file manager's trash") { db in
            try db.execute("""
                -- A directory may now show one asset under two names: a trash's
                -- files/ can hold a trashed album reference and the deleted
                -- asset itself. Albums still hold an asset once (checked by
                -- the library before every insert).
                DROP INDEX entries_by_child;
                CREATE INDEX entries_by_child ON entries(child, parent);
                -- Assets in Recently Deleted: when, and which trash entry shows
                -- them in a file manager's Trash (a uid's files/ directory and name).
                CREATE TABLE deleted_assets(
                    asset INTEGER PRIMARY KEY REFERENCES nodes(id),
                    deleted_at INTEGER NOT NULL,
                    -- (No foreign key: deleting any node would then scan this table.)
                    trash INTEGER,
                    trash_name BLOB
                );
                CREATE INDEX deleted_assets_by_time ON deleted_assets(deleted_at);
                -- The album entries a deleted asset had: restored with it.
                CREATE TABLE remembered_entries(
                    asset INTEGER NOT NULL REFERENCES nodes(id),
                    album INTEGER NOT NULL,
                    name BLOB NOT NULL,
                    PRIMARY KEY(asset, album)
                ) WITHOUT ROWID;
                -- The entries of a trashed album and its sub-albums, put aside
                -- (so they count as no link and show nowhere) until it is
                -- restored or the trash is emptied.
                CREATE TABLE trashed_entries(
                    album INTEGER NOT NULL REFERENCES nodes(id),
                    parent INTEGER NOT NULL,
                    name BLOB NOT NULL,
                    child INTEGER NOT NULL,
                    PRIMARY KEY(album, parent, name)
                ) WITHOUT ROWID;
                CREATE INDEX trashed_entries_by_child ON trashed_entries(child);
                -- Each uid's .Trash-UID and its three directories.
                CREATE TABLE trashes(
                    uid INTEGER PRIMARY KEY,
                    directory INTEGER NOT NULL REFERENCES nodes(id),
                    files INTEGER NOT NULL REFERENCES nodes(id),
                    info INTEGER NOT NULL REFERENCES nodes(id),
                    expunged INTEGER NOT NULL REFERENCES nodes(id)
                );
                CREATE UNIQUE INDEX trashes_by_files ON trashes(files);
                -- The data of small side files albumfs writes itself (the
                -- .trashinfo of an asset deleted with rm), until the first
                -- open writes it into a content file: a delete creates no file.
                CREATE TABLE side_file_data(
                    node INTEGER PRIMARY KEY REFERENCES nodes(id),
                    data BLOB NOT NULL
                );
                """)
            // Recently Deleted, in existing stores too, owned like the root.
            try db.execute("""
                INSERT INTO nodes(id, kind, parent, mode, uid, gid, atime, mtime, ctime, imported)
                SELECT \(FixedNode.recentlyDeleted), \(NodeKind.recentlyDeleted.rawValue), id, 493, uid, gid, atime, mtime, ctime, imported
                FROM nodes WHERE id = \(FixedNode.root);
                INSERT INTO entries(parent, name, child)
                SELECT \(FixedNode.root), CAST('Recently Deleted' AS BLOB), \(FixedNode.recentlyDeleted)
                FROM nodes WHERE id = \(FixedNode.root);
                """)
        },
        .init("what albumfs knows of each asset, and the computed views") { db in
            try db.execute("""
                -- Facts read from each asset's content (SEMANTICS.md § What albumfs
                -- knows of each asset), and the content file's size and mtime
                -- they were read from. month: YYYY-MM of the capture date as
                -- written in the file, else of the modification time (local).
                CREATE TABLE asset_facts(
                    asset INTEGER PRIMARY KEY REFERENCES nodes(id),
                    sha256 TEXT NOT NULL,
                    type TEXT,
                    kind TEXT NOT NULL,
                    captured TEXT,
                    month TEXT NOT NULL,
                    width INTEGER,
                    height INTEGER,
                    duration REAL,
                    location TEXT,
                    content_id TEXT,
                    screenshot INTEGER NOT NULL,
                    raw INTEGER NOT NULL,
                    data_size INTEGER NOT NULL,
                    data_mtime INTEGER NOT NULL
                );
                -- Each view is served from an index (no scan per listing).
                CREATE INDEX asset_facts_by_month ON asset_facts(month);
                CREATE INDEX asset_facts_by_kind ON asset_facts(kind);
                CREATE INDEX asset_facts_by_sha256 ON asset_facts(sha256);
                CREATE INDEX asset_facts_by_content_id ON asset_facts(content_id) WHERE content_id IS NOT NULL;
                CREATE INDEX asset_facts_screenshots ON asset_facts(asset) WHERE screenshot = 1;
                CREATE INDEX asset_facts_raw ON asset_facts(asset) WHERE raw = 1;
                -- Assets flagged favorite (ln into Smart Albums/Favorites).
                CREATE TABLE favorites(asset INTEGER PRIMARY KEY REFERENCES nodes(id));
                """)
            // The views' fixed directories, in existing stores too, owned like
            // the root: (id, kind, parent, name) as they were when this step
            // was written (frozen: a view added later gets its directory from
            // Schema.addViewDirectories, never from an edit of this step).
            for (id, kind, parent, name) in [(5, 12, 1, "Smart Albums"), (6, 13, 1, "By Date"), (7, 14, 5, "Favorites"), (8, 13, 5, "Videos"),
                                            (9, 13, 5, "Live Photos"), (10, 13, 5, "Screenshots"), (11, 13, 5, "RAW"), (12, 13, 5, "Duplicates")] as [(Int64, Int64, Int64, String)] {
                try db.statement("""
                    INSERT INTO nodes(id, kind, parent, mode, uid, gid, atime, mtime, ctime, imported)
                    SELECT ?1, ?2, ?3, 493, uid, gid, atime, mtime, ctime, imported FROM nodes WHERE id = 1
                    """).bind(.int(id), .int(kind), .int(parent)).run()
                try db.statement("INSERT INTO entries(parent, name, child) SELECT ?1, ?2, ?3 FROM nodes WHERE id = 1")
                    .bind(.int(parent), .blob(Array(name.utf8)), .int(id)).run()
            }
        },
        .init("the .trashinfo of an asset deleted with rm, written when first needed") { db in
            try db.execute("""
                -- The original path (`Camera Roll/NAME`) of an asset deleted with
                -- rm whose .trashinfo in its trash's info/ is not written yet: a
                -- delete writes no file and no node; the first look into info/
                -- writes them (SEMANTICS.md § Recently Deleted, and the file
                -- manager's trash). NULL once written, or when a file manager
                -- wrote its own.
                ALTER TABLE deleted_assets ADD COLUMN unwritten_info_path BLOB;
                CREATE INDEX deleted_assets_unwritten_info ON deleted_assets(trash)
                    WHERE unwritten_info_path IS NOT NULL;
                """)
        },
        .init("a purged asset's facts go with its pending purge, many at a time") { db in
            try db.execute("""
                -- asset_facts without its foreign key to nodes: a purge deletes
                -- the node at once and leaves the facts row (and its five index
                -- entries) until its pending_purges row goes, in a batch of many
                -- (SEMANTICS.md § Recently Deleted: Empty Trash). Readers that
                -- scan facts join nodes or the roll's entries.
                CREATE TABLE asset_facts_next(
                    asset INTEGER PRIMARY KEY,
                    sha256 TEXT NOT NULL,
                    type TEXT,
                    kind TEXT NOT NULL,
                    captured TEXT,
                    month TEXT NOT NULL,
                    width INTEGER,
                    height INTEGER,
                    duration REAL,
                    location TEXT,
                    content_id TEXT,
                    screenshot INTEGER NOT NULL,
                    raw INTEGER NOT NULL,
                    data_size INTEGER NOT NULL,
                    data_mtime INTEGER NOT NULL
                );
                INSERT INTO asset_facts_next(asset, sha256, type, kind, captured, month, width, height, duration,
                                             location, content_id, screenshot, raw, data_size, data_mtime)
                SELECT asset, sha256, type, kind, captured, month, width, height, duration,
                       location, content_id, screenshot, raw, data_size, data_mtime FROM asset_facts;
                DROP TABLE asset_facts;
                ALTER TABLE asset_facts_next RENAME TO asset_facts;
                CREATE INDEX asset_facts_by_month ON asset_facts(month);
                CREATE INDEX asset_facts_by_kind ON asset_facts(kind);
                CREATE INDEX asset_facts_by_sha256 ON asset_facts(sha256);
                CREATE INDEX asset_facts_by_content_id ON asset_facts(content_id) WHERE content_id IS NOT NULL;
                CREATE INDEX asset_facts_screenshots ON asset_facts(asset) WHERE screenshot = 1;
                CREATE INDEX asset_facts_raw ON asset_facts(asset) WHERE raw = 1;
                """)
        },
        .init("originals in an S3 bucket: the remote, the upload queue, the objects, the deletes") { db in
            try db.execute("""
                -- The store's remote, if it has one: where its originals are
                -- uploaded (SEMANTICS.md § Remote storage). Keys are never here.
                CREATE TABLE remote(
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    url TEXT NOT NULL,
                    endpoint TEXT NOT NULL,
                    region TEXT NOT NULL,
                    profile TEXT
                );
                -- Assets whose data is to be uploaded, in the order their last
                -- write ended (a re-queue takes a new rowid). Committed with that
                -- end, so a crash loses none; gone with the asset's purge.
                CREATE TABLE upload_queue(asset INTEGER NOT NULL UNIQUE);
                -- What the bucket holds of each asset: the SHA-256 that names its
                -- object, and the data's size and mtime when it was read for it
                -- (the object is this asset's data while they still match).
                CREATE TABLE remote_objects(
                    asset INTEGER PRIMARY KEY,
                    sha256 TEXT NOT NULL,
                    size INTEGER NOT NULL,
                    data_mtime INTEGER NOT NULL
                );
                CREATE INDEX remote_objects_by_sha256 ON remote_objects(sha256);
                -- Objects no asset needs any more, to delete (journaled like
                -- pending_purges: committed with the purge that freed them).
                CREATE TABLE remote_deletes(sha256 TEXT PRIMARY KEY);
                """)
        },
        .init("originals kept only in the bucket, and the ones kept local") { db in
            try db.execute("""
                -- Assets whose data was evicted (-o cache_size): only in the
                -- bucket, as remote_objects says, until an open fetches it.
                CREATE TABLE evicted(asset INTEGER PRIMARY KEY);
                -- Assets pinned local (user.albumfs.keep = 1): never evicted.
                CREATE TABLE kept_local(asset INTEGER PRIMARY KEY);
                """)
        },
        .init("the SHA-256 of every 4 MiB of each object") { db in
            try db.execute("""
                -- 32 bytes a chunk, in order (ObjectDigest): a read of data
                -- coming back from the bucket is checked chunk by chunk. NULL
                -- for an object recorded before: it is checked whole.
                ALTER TABLE remote_objects ADD COLUMN chunk_sha256 BLOB;
                """)
        },
        .init("each object's ETag, when an upload was queued, the uploader's last error, uploads under way") { db in
            try db.execute("""
                -- The ETag the bucket gave the object at upload: a HEAD that
                -- answers another one finds it overwritten behind our back
                -- (fsck --remote). NULL for an object recorded before.
                ALTER TABLE remote_objects ADD COLUMN etag TEXT;
                -- When the asset was queued (ns since the epoch; NULL before):
                -- stats says how long the oldest upload has waited.
                ALTER TABLE upload_queue ADD COLUMN queued_at INTEGER;
                -- What the uploader last failed at and when, while it fails
                -- (cleared by the next step that works): for stats, which reads
                -- the database alone, also while the store is mounted.
                CREATE TABLE remote_status(
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    last_error TEXT,
                    error_at INTEGER
                );
                -- Uploads that may have stored an object not recorded yet: one
                -- row an attempt, written before its PUT, gone with its record.
                -- Whatever ends them otherwise (a purge, the data changed, a
                -- crash and then a purge) owes their objects a delete unless an
                -- asset needs them, so no object is left that nothing knows.
                CREATE TABLE uploads_under_way(
                    asset INTEGER NOT NULL,
                    sha256 TEXT NOT NULL,
                    PRIMARY KEY (asset, sha256)
                );
                """)
        },
        .init("a thumbnail of each photo, made with its facts") { db in
            try db.execute("""
                -- A PNG of at most 256 pixels a side (SEMANTICS.md § Thumbnails),
                -- made by the facts worker from the content its facts row was
                -- read from: it goes with that row (facts read again, a purge).
                CREATE TABLE thumbnails(
                    asset INTEGER PRIMARY KEY REFERENCES asset_facts(asset) ON DELETE CASCADE,
                    png BLOB NOT NULL
                );
                """)
        },
        .init("the metadata's snapshots in the bucket, and the companions owed a delete") { db in
            try db.execute("""
                -- Whether a mount ended with every change in a snapshot in the
                -- bucket (SEMANTICS.md § Surviving the machine): set by the
                -- mount's last snapshot, cleared when a read-write open begins.
                CREATE TABLE snapshot_status(
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    saved INTEGER NOT NULL
                );
                -- Purged assets whose companion (assets/ID) the uploader deletes.
                CREATE TABLE companion_deletes(asset INTEGER PRIMARY KEY);
                """)
        },
        .init("one asset: originals kept through edits, identifiers, pairs, Hidden") { db in
            try db.execute("""
                -- An edited asset's first version (SEMANTICS.md § Edits keep the
                -- original): a node with no entries, kept as long as the asset.
                CREATE TABLE originals(
                    asset INTEGER PRIMARY KEY REFERENCES nodes(id),
                    original INTEGER NOT NULL UNIQUE
                );
                -- A node whose asset identifier is not its own id (an edit
                -- handed it the identifier of the version it replaced).
                CREATE TABLE asset_identifiers(
                    node INTEGER PRIMARY KEY REFERENCES nodes(id),
                    asset INTEGER NOT NULL
                );
                -- The two files of a pair (a Live Photo, RAW+JPEG), one row each way;
                -- secondary: the video or the raw, which the views leave out.
                CREATE TABLE pairs(
                    member INTEGER PRIMARY KEY REFERENCES nodes(id),
                    partner INTEGER NOT NULL UNIQUE,
                    secondary INTEGER NOT NULL
                );
                -- Hidden/, in existing stores too, owned like the root, 0700.
                INSERT INTO nodes(id, kind, parent, mode, uid, gid, atime, mtime, ctime, imported)
                SELECT \(FixedNode.hidden), \(NodeKind.hidden.rawValue), id, 448, uid, gid, atime, mtime, ctime, imported
                FROM nodes WHERE id = \(FixedNode.root);
                INSERT INTO entries(parent, name, child)
                SELECT \(FixedNode.root), CAST('Hidden' AS BLOB), \(FixedNode.hidden)
                FROM nodes WHERE id = \(FixedNode.root);
                """)
        },
        .init("thumbnails in the bucket") { db in
            try db.execute("""
                -- The SHA-256 of the thumbnail stored beside the asset's object
                -- (thumbnails/AB/SHA256.png, named by the object's SHA-256);
                -- NULL: none there yet. Snapshotted: a store recovered from the
                -- bucket (a second device) fetches what it says, and checks it.
                ALTER TABLE remote_objects ADD COLUMN thumbnail_sha256 TEXT;
                -- What the uploader looks through when idle: not every object.
                CREATE INDEX remote_objects_without_thumbnail ON remote_objects(asset) WHERE thumbnail_sha256 IS NULL;
                """)
        },
    ])

    /// Creates the fixed directories in a new store, owned by the first mounter.
    static func createFixedNodes(_ db: Database, owner: Caller, now: Nanoseconds) throws {
        let fixed: [(NodeID, NodeKind, Name?)] = [
            (FixedNode.root, .root, nil),
            (FixedNode.cameraRoll, .cameraRoll, FixedNode.cameraRollName),
            (FixedNode.albumsRoot, .albumsRoot, FixedNode.albumsRootName),
            // (An older store gets it from the migration that introduced it.)
            (FixedNode.recentlyDeleted, .recentlyDeleted, FixedNode.recentlyDeletedName),
            (FixedNode.hidden, .hidden, FixedNode.hiddenName),
        ]
        let views = ComputedViews.directories.map { ($0.id, $0.kind, Optional($0.name), $0.parent) }
        for (id, kind, name, parent) in fixed.map({ ($0.0, $0.1, $0.2, FixedNode.root) }) + views {
            // Hidden/ is its owner's only (SEMANTICS.md § Hidden).
            try db.insertFixedDirectory(id, kind: kind, parent: parent, name: name, mode: kind == .hidden ? 0o700 : 0o755,
                                        owner: owner, now: now)
        }
        try db.reserveNodeIDs(through: FixedNode.lastReservedID)
    }

    /// The directories of views registered after the store was made (one
    /// line in ComputedViews.all): added at open, owned like the root. Does
    /// nothing when every one is there.
    static func addViewDirectories(_ db: Database) throws {
        let missing = try ComputedViews.directories.filter { try db.kind(of: $0.id) == nil }
        guard !missing.isEmpty else { return }
        try db.transaction {
            for directory in missing {
                try db.insertDirectoryOwnedLikeTheRoot(directory.id, kind: directory.kind, parent: directory.parent, name: directory.name)
            }
        }
    }
}
