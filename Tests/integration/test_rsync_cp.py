"""Backups with rsync -a and cp -a / cp -r into and out of albums (issue 2 item 8)."""

import os
import stat

from albumfs_testlib import (
    all_entries, index_wait, ino, names, nlink, payload, proc_io, read, rsync_files_transferred, run, user_xattrs, write,
)

AS_ROOT = os.geteuid() == 0

# relative path -> (size, mode). Two files share the basename IMG.JPG on purpose.
FILES = {
    "top.jpg": (1000, 0o644),
    "a/IMG.JPG": (50_000, 0o644),
    "a/b/deep.png": (200_000, 0o600),
    "a/b/c/run.sh": (100, 0o755),
    "d/IMG.JPG": (60_000, 0o640),
    "d/empty.txt": (0, 0o644),
    "d/name with spaces.jpg": (3000, 0o644),
    "e/фото.jpg": (4000, 0o444),
}
DIRS = {"a": 0o755, "a/b": 0o750, "a/b/c": 0o700, "d": 0o755, "e": 0o775, "empty": 0o755}
# What the roll must show after copying the tree into an album: the basenames, the
# second IMG.JPG under the '(2)' form, and no temporary names.
ROLL = sorted(["top.jpg", "IMG.JPG", "IMG (2).JPG", "deep.png", "run.sh", "empty.txt",
               "name with spaces.jpg", "фото.jpg"])
BASE_NS = 1_600_000_000_000_000_000


def make_tree(root, *, xattrs=False):
    """A source tree with nested folders, varied modes, owners (as root) and nanosecond mtimes."""
    root.mkdir()
    for d in DIRS:
        (root / d).mkdir(parents=True, exist_ok=True)
    for i, (rel, (size, mode)) in enumerate(sorted(FILES.items())):
        p = root / rel
        write(p, payload(size, rel))
        os.chmod(p, mode)
        os.utime(p, ns=(BASE_NS + i * 7_000_000_011, BASE_NS + i * 1_000_000_007 + 123_456_789))
    if xattrs:
        os.setxattr(root / "top.jpg", "user.comment", b"sunset")
        os.setxattr(root / "a" / "b" / "deep.png", "user.rating", b"5")
        os.setxattr(root / "a", "user.album-note", b"holiday")
    if AS_ROOT:
        os.chown(root / "d" / "IMG.JPG", 1234, 5678)
        os.chown(root / "a" / "b", 4321, 8765)
    for i, (d, mode) in enumerate(sorted(DIRS.items(), key=lambda kv: -kv[0].count("/"))):
        os.chmod(root / d, mode)
        os.utime(root / d, ns=(BASE_NS + i, BASE_NS + 500_000_000_000 + i * 3_000_000_001))
    os.chmod(root, 0o750)
    os.utime(root, ns=(BASE_NS, BASE_NS + 42))
    return root


def tree_paths(root):
    out = ["."]
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            out.append(os.path.relpath(os.path.join(dirpath, n), root))
    return sorted(out)


def compare_trees(src, dst, *, xattrs=False):
    """dst has exactly src's entries, types, bytes, modes, mtimes (ns), owners (as root), user xattrs."""
    assert tree_paths(dst) == tree_paths(src)
    for rel in tree_paths(src):
        s, d = os.lstat(src / rel), os.lstat(dst / rel)
        where = f"{rel}: "
        assert stat.S_IFMT(s.st_mode) == stat.S_IFMT(d.st_mode), where + "type"
        assert stat.S_IMODE(s.st_mode) == stat.S_IMODE(d.st_mode), \
            where + f"mode {oct(stat.S_IMODE(d.st_mode))} != {oct(stat.S_IMODE(s.st_mode))}"
        assert d.st_mtime_ns == s.st_mtime_ns, where + f"mtime {d.st_mtime_ns} != {s.st_mtime_ns}"
        if AS_ROOT:
            assert (d.st_uid, d.st_gid) == (s.st_uid, s.st_gid), where + "owner"
        if stat.S_ISREG(s.st_mode):
            assert d.st_size == s.st_size, where + "size"
            assert read(dst / rel) == read(src / rel), where + "content"
        if xattrs:
            assert user_xattrs(dst / rel) == user_xattrs(src / rel), where + "user xattrs"


def rsync(src, dst):
    return run(["rsync", "-a", "--stats", f"{src}/", f"{dst}/"], text=True).stdout


def test_rsync_into_album_twice_transfers_nothing(mount, tmp_path):
    """Item 8: rsync -a SRC/ Albums/Backup/ twice: the second run transfers no file; no temp names in the roll."""
    src = make_tree(tmp_path / "src")
    backup = mount.albums / "Backup"
    assert rsync_files_transferred(rsync(src, backup)) == len(FILES)
    compare_trees(src, backup)
    assert names(mount.roll) == ROLL

    assert rsync_files_transferred(rsync(src, backup)) == 0
    assert names(mount.roll) == ROLL
    compare_trees(src, backup)


def test_rsync_out_of_album_reproduces_source(mount, tmp_path):
    """Item 8: rsync -a Albums/Backup/ OUT/ reproduces SRC byte for byte, with modes and mtimes."""
    src = make_tree(tmp_path / "src")
    backup, out = mount.albums / "Backup", tmp_path / "out"
    rsync(src, backup)
    rsync(backup, out)
    compare_trees(src, out)


def test_rsync_update_keeps_album_memberships(mount, tmp_path):
    """Update row via rsync: a changed file re-synced into one album stays in its other albums, one roll entry."""
    src = make_tree(tmp_path / "src")
    backup, fav = mount.albums / "Backup", mount.albums / "Fav"
    rsync(src, backup)
    os.mkdir(fav)
    os.link(backup / "a" / "b" / "deep.png", fav / "deep.png")
    old = ino(fav / "deep.png")
    read(fav / "deep.png")  # cache the old version

    new_data = payload(210_000, "deep v2")
    write(src / "a" / "b" / "deep.png", new_data)
    os.utime(src / "a" / "b" / "deep.png", ns=(BASE_NS, BASE_NS + 999_000_000_001))
    assert rsync_files_transferred(rsync(src, backup)) == 1

    assert read(fav / "deep.png") == new_data
    assert ino(fav / "deep.png") == ino(backup / "a" / "b" / "deep.png") == ino(mount.roll / "deep.png")
    assert ino(fav / "deep.png") != old
    assert old not in all_entries(mount.mp).values()
    assert nlink(fav / "deep.png") == 3
    assert names(mount.roll) == ROLL
    compare_trees(src, backup)


def test_rsync_tree_into_albums_root(mount, tmp_path):
    """Layout: rsync -a tree/ MOUNT/Albums/ succeeds (Albums/ keeps attributes) and a rerun transfers nothing."""
    tree = tmp_path / "tree"
    (tree / "Trips" / "2024").mkdir(parents=True)
    (tree / "Family").mkdir()
    write(tree / "Trips" / "2024" / "p.jpg", payload(5000, "p"))
    write(tree / "Family" / "f.jpg", payload(6000, "f"))
    for i, p in enumerate(["Trips/2024/p.jpg", "Family/f.jpg", "Trips/2024", "Trips", "Family"]):
        os.utime(tree / p, ns=(BASE_NS, BASE_NS + i * 1_000_000_001 + 5))
    os.chmod(tree, 0o750)
    os.utime(tree, ns=(BASE_NS, BASE_NS + 77))

    assert rsync_files_transferred(rsync(tree, mount.albums)) == 2
    assert rsync_files_transferred(rsync(tree, mount.albums)) == 0
    compare_trees(tree, mount.albums)
    assert names(mount.roll) == ["f.jpg", "p.jpg"]


def test_cp_a_round_trip(mount, tmp_path):
    """Item 8: cp -a SRC into an album and back out reproduces it (bytes, modes, mtimes, user xattrs)."""
    src = make_tree(tmp_path / "src", xattrs=True)
    copy, out = mount.albums / "CpBackup", tmp_path / "out"
    run(["cp", "-a", src, copy])
    compare_trees(src, copy, xattrs=True)
    assert names(mount.roll) == ROLL
    run(["cp", "-a", copy, out])
    # Also proves user.albumfs.* is not listed: cp -a would have copied it into OUT.
    compare_trees(src, out, xattrs=True)


def test_cp_r_into_album_creates_nested_albums(mount, tmp_path):
    """cp -r of a tree into Albums/ makes one album per folder and one asset per file."""
    src = make_tree(tmp_path / "src")
    copy = mount.albums / "Copy"
    run(["cp", "-r", src, copy])
    files = run(["find", copy, "-type", "f", "-print0"]).stdout.split(b"\0")
    dirs = run(["find", copy, "-mindepth", "1", "-type", "d", "-print0"]).stdout.split(b"\0")
    rel = lambda ps: sorted(os.path.relpath(os.fsdecode(p), copy) for p in ps if p)  # noqa: E731
    assert rel(files) == sorted(FILES)
    assert rel(dirs) == sorted(DIRS)
    for f in FILES:
        run(["cmp", src / f, copy / f])
    assert names(mount.roll) == ROLL
    assert all(nlink(copy / f) == 2 for f in FILES)


def test_cp_then_cmp_and_cp_p_loops(mount, tmp_path):
    """Items 1/8 under the multi-threaded loop: `cp a b && cmp a b` and `cp -p` keep content and times, every time."""
    src = tmp_path / "src.jpg"
    write(src, payload(300_000, "loop"))
    os.utime(src, ns=(BASE_NS, BASE_NS + 123_456_789))
    album = mount.albums / "Loop"
    os.mkdir(album)
    script = r'''
        src=$1; dst=$2
        want=$(stat -c '%y %s %a' "$src")
        for i in $(seq 1 100); do
            cp "$src" "$dst/c$i.jpg" && cmp "$src" "$dst/c$i.jpg" || { echo "cp+cmp round $i"; exit 1; }
            cp -p "$src" "$dst/p$i.jpg" || exit 1
            got=$(stat -c '%y %s %a' "$dst/p$i.jpg")
            [ "$got" = "$want" ] || { echo "cp -p round $i: $got != $want"; exit 1; }
        done
    '''
    run(["bash", "-c", script, "loop", src, album], timeout=300)
    assert len(names(mount.roll)) == 200


def test_rsync_rounds_keep_mtimes(mount, tmp_path):
    """Item 8 under the multi-threaded loop: after each changed-file sync, a rerun transfers nothing."""
    src = make_tree(tmp_path / "src")
    backup = mount.albums / "Backup"
    rsync(src, backup)
    for round_ in range(10):
        f = src / sorted(FILES)[round_ % len(FILES)]
        os.chmod(f, 0o644)
        write(f, payload(20_000 + round_, f"round {round_}"))
        os.utime(f, ns=(BASE_NS, BASE_NS + (round_ + 1) * 10_000_000_007))
        assert rsync_files_transferred(rsync(src, backup)) == 1, f"round {round_}"
        assert rsync_files_transferred(rsync(src, backup)) == 0, f"round {round_}: mtimes were lost"
    compare_trees(src, backup)
    assert names(mount.roll) == ROLL


def test_no_change_rsync_after_a_backup_costs_few_requests(mount, tmp_path):
    """The first backup reads every photo, and the kernel then takes each one's attributes
    as stale (atime). The second, no-change run must refresh them in batches through its
    directory listing, not with one request per file."""
    album, out = mount.albums / "Trip", tmp_path / "out"
    album.mkdir()
    count = 400   # requests are counted as the daemon's read(2) calls: one each
    for i in range(count):
        (album / f"IMG_{i:04d}.JPG").write_bytes(b"p" * 3000)
    run(["rsync", "-a", f"{album}/", f"{out}/"])                 # lists, then reads every file
    # The daemon reads each new photo's facts after its close (SEMANTICS.md § What albumfs knows
    # of each asset: eventual), with read(2) calls of its own: counted from once it has done so.
    index_wait(mount.mp)
    before = proc_io(mount.proc.pid)["syscr"]
    run(["rsync", "-a", f"{album}/", f"{out}/"])                 # lstat of every file, nothing to copy
    requests = proc_io(mount.proc.pid)["syscr"] - before
    assert requests < count // 4, f"{requests} requests for a no-change rsync of {count} files"
