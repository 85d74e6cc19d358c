"""Bad input and hostile conditions (issue 3 part 5): a full disk, broken or foreign stores,
read-only mounts, names at the limit, 100,000 entries in one album.

Every refused mount must exit with status 3 and one line on stderr (30 s counts as a hang), never mount,
and leave the store as it was: once the cause is gone, the library mounts with everything in
it and `albumfs fsck` is clean.

ALBUMFS_BIG_ALBUM sets the size of the big album (default 100,000).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import time
from pathlib import Path

import pytest

from albumfs_testlib import (
    ALBUMFS, MiB, NOBODY, REFUSAL_WAIT, as_user, assert_fsck_clean, attempt, bjoin, bnames, content_files,
    create, expect_errno, fsck, names, payload, public_albumfs, public_tmpdir, sha256, read, run, small_tmpfs,
    stop_background_mount, write,
)

AS_ROOT = os.geteuid() == 0
BIG_ALBUM = int(os.environ.get("ALBUMFS_BIG_ALBUM", "100000"))


# --- helpers --------------------------------------------------------------------------


def library_dump(store) -> dict:
    """The database's rows, read-only (to show that a refused mount changed nothing)."""
    con = sqlite3.connect(f"file:{os.fspath(store)}/library.sqlite?mode=ro", uri=True, timeout=5)
    try:
        tables = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {t: sorted(con.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in sorted(tables)}
    finally:
        con.close()


def content_state(store) -> dict[str, tuple[int, str]]:
    """Content files: relative path -> (size, sha256)."""
    out = {}
    for p in content_files(store):
        out[os.path.relpath(p, store)] = (os.path.getsize(p), sha256(p))
    return out


def populated_store(mount_factory, name: str = "lib", n: int = 12) -> tuple:
    """A store with an album and n files in it, unmounted. Returns (mount, {album path: bytes})."""
    m = mount_factory(name)
    (m.albums / "Trip").mkdir()
    files = {}
    for i in range(n):
        data = payload(1000 + 97 * (i % 300), f"{name}-{i}")
        write(m.albums / "Trip" / f"p{i:02d}.jpg", data)
        files[f"p{i:02d}.jpg"] = data
    m.unmount()
    return m, files


def assert_library_intact(m, files: dict[str, bytes]) -> None:
    """Mount, compare every file (album and roll), unmount, fsck clean."""
    m.start()
    assert names(m.albums / "Trip") == sorted(files)
    assert names(m.roll) == sorted(files)
    for n, data in files.items():
        assert read(m.albums / "Trip" / n) == data, f"{n}: content differs"
        assert os.stat(m.albums / "Trip" / n).st_ino == os.stat(m.roll / n).st_ino
    m.unmount()
    assert_fsck_clean(m.store)


def assert_refused(m, tmp_path, why: str, *, user_cmd=None) -> str:
    """`albumfs mount --store STORE MP` (background form) must exit 3 with one line on stderr,
    without mounting (still running after REFUSAL_WAIT: a hang). Returns the message."""
    cmd = user_cmd or [ALBUMFS, "mount", "--store", m.store, m.mp]
    rc, out, mounted = attempt(cmd, tmp_path, [m.mp])
    text = out.decode(errors="backslashreplace").strip()
    assert rc is not None, f"{why}: albumfs was still running after {REFUSAL_WAIT:.0f} s (a hang); output: {text!r}"
    assert not mounted, f"{why}: the store was mounted (exit {rc}); it must be refused"
    assert rc == 3, f"{why}: exit status {rc}, want 3; output: {text!r}"
    assert text, f"{why}: refused without a message"
    assert "\n" not in text, f"{why}: the message must be one line, got:\n{text}"
    return text


# --- the backing disk full -------------------------------------------------------------


def fill(m, album: Path) -> tuple[dict[str, bytes], list[str]]:
    """Write 1 MiB files, then 4 KiB ones, into album until ENOSPC. Returns the files whose
    close() succeeded and every errno seen (all must be ENOSPC)."""
    done, seen = {}, []
    for size, prefix, limit in ((MiB, "big", 200), (4096, "small", 3000)):
        for i in range(limit):
            n = f"{prefix}{i:04d}.bin"
            data = payload(size, n)
            try:
                with open(album / n, "wb") as f:
                    f.write(data)
            except OSError as e:
                seen.append(errno.errorcode.get(e.errno, str(e.errno)))
                break
            done[n] = data
        else:
            raise AssertionError(f"no ENOSPC after {limit} files of {size} bytes: is the store on the small disk?")
    return done, seen


def grow(disk: Path, size: str) -> None:
    """Free space on the store's disk (as deleting other files on it would)."""
    run(["mount", "-o", f"remount,size={size}", disk], timeout=30)


@contextlib.contextmanager
def store_on_small_disk(mount_factory, tmp_path, size: str = "24m"):
    """A mount whose store is on a tmpfs of `size`, with an album Full; yields (mount, disk,
    album). The mount is cleaned up before the tmpfs goes."""
    with small_tmpfs(tmp_path / "disk", size) as disk:
        m = mount_factory("full", store=disk / "store", make_store=False)
        try:
            album = m.albums / "Full"
            album.mkdir()
            yield m, disk, album
        finally:
            m.expect_mounted = False    # a failed test may leave it mounted: not a vanished mount
            m.cleanup()


@pytest.mark.skipif(not AS_ROOT, reason="mounting a tmpfs needs root")
@pytest.mark.mount_timeout(180)
def test_disk_full_writes_fail_with_enospc(mount_factory, tmp_path):
    """Disk full: with the store on a 24 MiB tmpfs, writes fail with ENOSPC (never EIO), and so
    does mkdir if the database has no free page left for it (it may also succeed: it needs no data);
    what was written before stays readable; once space is freed the library mounts, fsck is
    clean, and writes work again."""
    with store_on_small_disk(mount_factory, tmp_path) as (m, disk, album):
        done, seen = fill(m, album)
        assert set(seen) == {"ENOSPC"}, f"writes on a full disk failed with {seen}, want ENOSPC only"
        assert len(done) >= 10, f"only {len(done)} files fit: the disk filled up too early"
        for n, data in done.items():   # reading needs no space
            assert read(album / n) == data, f"{n}: content differs on the full disk"
        try:
            os.mkdir(m.albums / "Another")
        except OSError as e:
            assert e.errno == errno.ENOSPC, f"mkdir on a full disk: {errno.errorcode.get(e.errno)}, want ENOSPC"
        m.unmount()

        grow(disk, "64m")
        m.start()
        for n, data in done.items():
            assert read(album / n) == data, f"{n}: content differs after the disk-full episode"
        assert names(m.roll) == names(album), "roll and album disagree after the disk-full episode"
        m.unmount()
        assert_fsck_clean(m.store, "after the disk-full episode")
        m.start()
        write(album / "after.bin", payload(2 * MiB, "after"))
        assert read(album / "after.bin") == payload(2 * MiB, "after")
        m.unmount()
        assert_fsck_clean(m.store, "after writing again")


@pytest.mark.skipif(not AS_ROOT, reason="mounting a tmpfs needs root")
@pytest.mark.mount_timeout(180)
def test_disk_full_library_can_be_reopened_and_emptied(mount_factory, tmp_path):
    """Disk full: a library whose disk is full still mounts (the way to free space is to delete
    photos), deleting through the mount frees space, fsck is clean, and writes work again."""
    with store_on_small_disk(mount_factory, tmp_path) as (m, disk, album):
        done, seen = fill(m, album)
        assert set(seen) == {"ENOSPC"}, seen
        m.unmount()
        m.start()   # fails with the daemon's message if a full disk keeps the store from opening
        victims = sorted(n for n in done if n.startswith("big"))[:5]
        for n in victims:
            os.unlink(m.roll / n)                       # deletes the asset, frees its data
        write(album / "after.bin", payload(2 * MiB, "after"))
        assert read(album / "after.bin") == payload(2 * MiB, "after")
        for n, data in done.items():
            if n not in victims:
                assert read(album / n) == data, f"{n}: content differs"
        m.unmount()
        assert_fsck_clean(m.store, "after deleting on a full disk")


@pytest.mark.skipif(not AS_ROOT, reason="mounting a tmpfs needs root")
@pytest.mark.mount_timeout(120)
def test_disk_full_delete_through_the_live_mount(mount_factory, tmp_path):
    """Disk full: on the full mount itself, `rm` of photos works (to Recently Deleted), `rm` there
    purges them and frees their space (SEMANTICS.md § Recently Deleted), and a write then succeeds
    again."""
    with store_on_small_disk(mount_factory, tmp_path) as (m, disk, album):
        done, seen = fill(m, album)
        assert set(seen) == {"ENOSPC"}, seen
        try:
            for n in sorted(n for n in done if n.startswith("big"))[:5]:
                os.unlink(m.roll / n)
                os.unlink(m.mp / "Recently Deleted" / n)
        except OSError as e:
            pytest.fail(f"rm of a photo on a full disk failed with {errno.errorcode.get(e.errno)}: the "
                        "library cannot be freed from inside", pytrace=False)
        write(album / "after.bin", payload(2 * MiB, "after"))
        assert read(album / "after.bin") == payload(2 * MiB, "after")
        m.unmount()
        grow(disk, "64m")   # room for the mount's own clean-up, if it needs any
        m.start()
        m.unmount()
        assert_fsck_clean(m.store, "after the disk-full episode")


# --- refused stores --------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["garbage", "truncated-to-zero", "truncated-to-half", "one-page"])
def test_corrupt_or_truncated_database_is_refused(mount_factory, tmp_path, damage):
    """A corrupt or truncated library.sqlite: mount exits 3 with one line, never a hang, never a
    fresh empty library; the content is untouched; fsck says it cannot read it (exit 2)."""
    m, files = populated_store(mount_factory, n=300)
    db = m.store / "library.sqlite"
    assert not (m.store / "library.sqlite-wal").exists() or (m.store / "library.sqlite-wal").stat().st_size == 0, \
        "after a clean unmount the WAL should be checkpointed"
    original = db.read_bytes()
    assert len(original) >= 8 * 4096, f"database only {len(original)} bytes: the damage would not be partial"
    if damage == "garbage":
        db.write_bytes(os.urandom(len(original)))
    elif damage == "truncated-to-zero":
        db.write_bytes(b"")
    elif damage == "truncated-to-half":
        db.write_bytes(original[: len(original) // 2])
    else:
        db.write_bytes(original[:4096])
    content_before = content_state(m.store)

    cmd = [ALBUMFS, "mount", "--store", m.store, m.mp]
    rc, out, mounted = attempt(cmd, tmp_path, [m.mp])
    after = content_state(m.store)
    lost = sorted(set(content_before) - set(after))
    assert not lost, (f"mounting a {damage} database (exit {rc}, mounted: {mounted}) deleted the data of "
                      f"{len(lost)} photos: {lost}")
    assert after == content_before, "a mount attempt changed the content directory"
    assert_refused(m, tmp_path, damage)
    p = fsck(m.store)
    assert p.returncode == 2, f"fsck of a {damage} database: exit {p.returncode}, want 2\n{p.stdout}{p.stderr}"
    assert p.stderr.strip() or p.stdout.strip(), "fsck must say why it cannot check the store"

    for extra in ("library.sqlite-wal", "library.sqlite-shm"):
        (m.store / extra).unlink(missing_ok=True)
    db.write_bytes(original)
    assert_library_intact(m, files)


def test_newer_format_is_refused(mount_factory, tmp_path):
    """A store from a newer albumfs (user_version 99): refused (exit 3, one line) and left as it was."""
    m, files = populated_store(mount_factory)
    con = sqlite3.connect(m.store / "library.sqlite")
    version = con.execute("PRAGMA user_version").fetchone()[0]
    con.execute("PRAGMA user_version = 99")
    con.commit()
    con.close()
    before = library_dump(m.store)
    msg = assert_refused(m, tmp_path, "user_version 99")
    assert "99" in msg or "newer" in msg.lower() or "format" in msg.lower(), f"unclear message: {msg!r}"
    assert library_dump(m.store) == before, "a refused mount changed the database"
    con = sqlite3.connect(m.store / "library.sqlite")
    assert con.execute("PRAGMA user_version").fetchone()[0] == 99
    con.execute(f"PRAGMA user_version = {version}")
    con.commit()
    con.close()
    assert_library_intact(m, files)


def _chattr_works(path: Path) -> bool:
    probe = path / ".chattr-probe"
    probe.write_bytes(b"")
    try:
        ok = subprocess.run(["chattr", "+i", probe], capture_output=True, timeout=30).returncode == 0
        if ok:
            subprocess.run(["chattr", "-i", probe], capture_output=True, timeout=30)
        return ok
    finally:
        probe.unlink()


@pytest.mark.skipif(not AS_ROOT, reason="chattr +i needs root")
def test_immutable_database_is_refused(mount_factory, tmp_path):
    """A database root cannot write (chattr +i): refused (exit 3, one line), untouched."""
    m, files = populated_store(mount_factory)
    db = m.store / "library.sqlite"
    if not _chattr_works(m.store):
        pytest.skip("this filesystem does not support chattr +i (the non-root variant still runs)")
    before = library_dump(m.store)
    run(["chattr", "+i", db])
    try:
        assert_refused(m, tmp_path, "immutable database")
    finally:
        run(["chattr", "-i", db])
    assert library_dump(m.store) == before
    assert_library_intact(m, files)


@pytest.mark.skipif(not AS_ROOT, reason="needs root to set up another user's store")
def test_read_only_database_of_another_user_is_refused(mount_factory, tmp_path):
    """A database its owner cannot write (a store of nobody's, library.sqlite 0400): `albumfs mount`
    run as nobody exits 3 with one line; with -o ro it mounts and reads (where /dev/fuse lets
    nobody mount at all)."""
    m, files = populated_store(mount_factory)
    with public_tmpdir() as pub:
        binary = public_albumfs()       # the checkout may not be reachable for nobody
        store, mp = pub / "store", pub / "mnt"
        shutil.copytree(m.store, store, symlinks=True)
        mp.mkdir(mode=0o700)
        for d in [mp, store] + list(store.rglob("*")):
            os.lchown(d, NOBODY, NOBODY)
        os.chmod(store / "library.sqlite", 0o400)
        nobody = ["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups", binary]

        class M:   # what assert_refused needs
            pass
        mm = M()
        mm.store, mm.mp = store, mp
        assert_refused(mm, tmp_path, "database not writable by its owner",
                       user_cmd=nobody + ["mount", "--store", store, mp])
        if os.stat("/dev/fuse").st_mode & 0o006 != 0o006:
            return   # nobody cannot open /dev/fuse here (libfuse 3 does not fall back to fusermount3)
        p = as_user([binary, "mount", "--store", store, "-o", "ro", mp], timeout=30)
        try:
            assert p.returncode == 0, f"-o ro of a read-only database: exit {p.returncode}: {p.stderr.strip()}"
            got = as_user(["sha256sum", f"{mp}/Albums/Trip/p00.jpg"], timeout=30)
            assert got.returncode == 0, got.stderr
            assert got.stdout.split()[0] == sha256(files["p00.jpg"])
        finally:
            left = stop_background_mount(mp, store)
        assert not left, f"the daemon of {store} was still running 10 s after its unmount"


def _interrupted_write(m) -> None:
    """Leave an unfinished write behind: a file written but not closed when the daemon is killed."""
    fd = os.open(m.albums / "Trip" / "open.jpg", os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, payload(50_000, "open"))
    m.proc.send_signal(signal.SIGKILL)
    m.proc.wait(timeout=10)
    try:
        os.close(fd)
    except OSError:
        pass
    m.kill()


@pytest.mark.parametrize("unplugged", ["content-missing", "content-empty"])
def test_unplugged_content_is_refused_and_never_cleaned_up(mount_factory, tmp_path, unplugged):
    """The content directory missing, or present but empty (an external disk not plugged in) while the
    database lists assets: refused (exit 3, one line), never shown as an empty library, and nothing is
    "cleaned up" (the database is unchanged, even the record of an interrupted write); plugged back
    in, everything is there and fsck is clean."""
    m, files = populated_store(mount_factory)
    m.start()
    _interrupted_write(m)          # recovery work is pending: a refused mount must not do it blind
    before = library_dump(m.store)
    assert before.get("unfinished_writes"), "precondition: the killed write should be recorded as unfinished"
    content = m.store / "content"
    away = m.store.parent / "content-unplugged"
    content.rename(away)
    if unplugged == "content-empty":
        content.mkdir(mode=0o700)
    try:
        msg = assert_refused(m, tmp_path, unplugged)
        assert library_dump(m.store) == before, (
            f"a refused mount changed the database ({msg!r}): {diff(before, library_dump(m.store))}")
        assert not content.exists() or os.listdir(content) == [], "the refused mount wrote into the content directory"
    finally:
        if content.exists():
            shutil.rmtree(content)
        away.rename(content)
    m.start()
    for n, data in files.items():
        assert read(m.albums / "Trip" / n) == data
    opened = m.albums / "Trip" / "open.jpg"
    assert len(read(opened)) == os.stat(opened).st_size, "the interrupted write: size and data disagree"
    m.unmount()
    assert_fsck_clean(m.store, "after plugging the content back in")


def diff(before: dict, after: dict) -> str:
    out = []
    for t in before:
        gone = [r for r in before[t] if r not in after.get(t, [])]
        new = [r for r in after.get(t, []) if r not in before[t]]
        if gone or new:
            out.append(f"{t}: removed {gone[:5]} added {new[:5]}")
    return "; ".join(out)


@pytest.mark.skipif(not AS_ROOT, reason="chown needs root")
@pytest.mark.parametrize("foreign", ["owned-by-another-uid", "world-writable"])
def test_foreign_or_world_writable_store_is_refused(mount_factory, tmp_path, foreign):
    """A store directory owned by someone else, or writable by everyone: refused (exit 3, one line);
    made private again, it mounts with everything in it."""
    m, files = populated_store(mount_factory)
    mode = stat.S_IMODE(os.stat(m.store).st_mode)
    if foreign == "owned-by-another-uid":
        os.chown(m.store, NOBODY, NOBODY)
    else:
        os.chmod(m.store, 0o777)
    try:
        assert_refused(m, tmp_path, foreign)
    finally:
        os.chown(m.store, 0, 0)
        os.chmod(m.store, mode)
    assert_library_intact(m, files)


# --- read-only mounts ------------------------------------------------------------------


def test_read_only_mount_refuses_every_change(mount_factory, tmp_path):
    """-o ro: create, mkdir, rmdir, unlink, rename, link, chmod, chown, utimes, truncate, setxattr,
    removexattr and every open for writing fail with EROFS; the store is unchanged; fsck runs."""
    m = mount_factory("ro")
    trip, empty = m.albums / "Trip", m.albums / "Empty"
    trip.mkdir()
    empty.mkdir()
    write(trip / "x.jpg", b"x" * 1000)
    os.setxattr(trip / "x.jpg", "user.k", b"v")
    m.unmount()
    before, content_before = library_dump(m.store), content_state(m.store)
    m.start(["ro"])
    x, rx = trip / "x.jpg", m.roll / "x.jpg"
    attempts = {
        "create in roll": lambda: create(m.roll / "new.jpg"),
        "create in album": lambda: create(trip / "new.jpg"),
        "mkdir": lambda: os.mkdir(m.albums / "New"),
        "mkdir nested": lambda: os.mkdir(trip / "Sub"),
        "rmdir": lambda: os.rmdir(empty),
        "unlink album entry": lambda: os.unlink(x),
        "unlink roll entry": lambda: os.unlink(rx),
        "rename entry": lambda: os.rename(x, trip / "y.jpg"),
        "rename album": lambda: os.rename(trip, m.albums / "Moved"),
        "move entry": lambda: os.rename(x, empty / "x.jpg"),
        "link": lambda: os.link(rx, empty / "x.jpg"),
        "chmod file": lambda: os.chmod(x, 0o600),
        "chmod album": lambda: os.chmod(trip, 0o700),
        "chown": lambda: os.chown(x, 1, 1),
        "utime": lambda: os.utime(x, (1, 1)),
        "truncate": lambda: os.truncate(x, 0),
        "setxattr": lambda: os.setxattr(x, "user.k", b"w"),
        "setxattr album": lambda: os.setxattr(trip, "user.k", b"w"),
        "removexattr": lambda: os.removexattr(x, "user.k"),
        "open O_WRONLY": lambda: os.close(os.open(x, os.O_WRONLY)),
        "open O_RDWR": lambda: os.close(os.open(x, os.O_RDWR)),
        "open O_APPEND": lambda: os.close(os.open(x, os.O_WRONLY | os.O_APPEND)),
        "open O_TRUNC": lambda: os.close(os.open(x, os.O_WRONLY | os.O_TRUNC)),
        "symlink": lambda: os.symlink("x.jpg", trip / "link"),
        "mkfifo": lambda: os.mkfifo(trip / "fifo"),
    }
    wrong = []
    for what, fn in attempts.items():
        try:
            fn()
            wrong.append(f"{what}: succeeded")
        except OSError as e:
            if e.errno != errno.EROFS:
                wrong.append(f"{what}: {errno.errorcode.get(e.errno, e.errno)}")
    assert not wrong, "on a read-only mount, want EROFS:\n  " + "\n  ".join(wrong)
    assert read(x) == b"x" * 1000 and os.getxattr(x, "user.k") == b"v"
    assert run(["cp", "/etc/hostname", str(trip) + "/"], check=False).returncode != 0
    p = fsck(m.store)
    assert p.returncode == 0, f"fsck of a store mounted -o ro: exit {p.returncode}\n{p.stdout}{p.stderr}"
    m.unmount()
    assert library_dump(m.store) == before, "the read-only mount changed the database"
    assert content_state(m.store) == content_before, "the read-only mount changed the content"


# --- names at the limit ----------------------------------------------------------------


def test_names_at_255_and_256_bytes(mount_factory):
    """Names: 255 bytes work for albums nested in albums and for files; 256 bytes give ENAMETOOLONG
    for mkdir, album rename and move, entry rename between albums and in the roll, and cp; a
    255-byte name in 11 albums gives roll names of at most 255 bytes: x, x (2) … x (10)."""
    m = mount_factory("names")
    n255 = b"n" * 251 + b".jpg"
    a255 = bjoin(m.albums, b"A" * 255)
    deep = bjoin(bjoin(a255, b"B" * 255), b"C" * 255)
    os.makedirs(deep)
    write(bjoin(deep, n255), b"deep")
    assert bnames(deep) == [n255] and read(bjoin(m.roll, n255)) == b"deep"
    assert n255 in bnames(m.roll)

    long = b"L" * 256
    other = m.albums / "Other"
    other.mkdir()
    expect_errno(errno.ENAMETOOLONG, os.mkdir, bjoin(m.albums, long))
    expect_errno(errno.ENAMETOOLONG, os.mkdir, bjoin(a255, long))
    expect_errno(errno.ENAMETOOLONG, os.rename, other, bjoin(m.albums, long))
    expect_errno(errno.ENAMETOOLONG, os.rename, other, bjoin(a255, long))
    expect_errno(errno.ENAMETOOLONG, os.rename, bjoin(deep, n255), bjoin(other, long))
    expect_errno(errno.ENAMETOOLONG, os.rename, bjoin(m.roll, n255), bjoin(m.roll, long))
    assert run([b"cp", b"/etc/hostname", bjoin(other, long)], check=False).returncode != 0
    assert bnames(other) == [] and bnames(m.roll) == [n255]
    assert sorted(bnames(m.albums)) == sorted([b"A" * 255, b"Other"])

    x = b"x" * 251 + b".JPG"
    for k in range(11):
        album = m.albums / f"S{k:02d}"
        album.mkdir()
        write(bjoin(album, x), b"%d" % k)
    want = [x] + [b"x" * 247 + b" (%d).JPG" % k for k in range(2, 10)] + [b"x" * 246 + b" (10).JPG",
                                                                            b"x" * 246 + b" (11).JPG"]
    got = sorted(n for n in bnames(m.roll) if n.startswith(b"x"))
    assert all(len(n) <= 255 for n in got), [len(n) for n in got]
    assert got == sorted(want), [n[240:] for n in got]
    for k in range(11):
        ino = os.stat(bjoin(m.albums / f"S{k:02d}", x)).st_ino
        assert read(bjoin(m.albums / f"S{k:02d}", x)) == b"%d" % k
        assert ino in {os.stat(bjoin(m.roll, n)).st_ino for n in got}
    m.unmount()
    assert_fsck_clean(m.store)


# --- size -------------------------------------------------------------------------------


def store_bytes(store) -> int:
    """Bytes of the store's database files (library.sqlite and its -wal and -shm)."""
    return sum(os.path.getsize(p) for p in Path(store).glob("library.sqlite*"))


@pytest.mark.mount_timeout(180)
def test_store_stays_proportional_to_the_library(mount_factory):
    """Disk use: 5,000 creates and 5,000 renames leave database files of a few tens of MiB (the
    WAL is checkpointed as it goes, every 10,000 pages: 40 MiB at most), not a WAL that grows with
    every operation until unmount (over 200 MiB here)."""
    m = mount_factory("size")
    album = m.albums / "A"
    album.mkdir()
    for i in range(5000):
        create(album / f"f{i:05d}.jpg")
    for i in range(5000):
        os.rename(album / f"f{i:05d}.jpg", album / f"g{i:05d}.jpg")
    size = store_bytes(m.store)
    wal = m.store / "library.sqlite-wal"
    wal_size = wal.stat().st_size if wal.exists() else 0
    assert size < 64 * MiB, (f"database files take {size / MiB:.0f} MiB (WAL {wal_size / MiB:.0f} MiB) while "
                             "mounted, for 5,000 entries: the WAL is never checkpointed")
    m.unmount()
    assert store_bytes(m.store) < 16 * MiB


@pytest.mark.mount_timeout(900)
def test_100000_entries_in_one_album(mount_factory):
    """Size: ALBUMFS_BIG_ALBUM (default 100,000) files in one album: `ls | wc -l`, `find -type f |
    wc -l` and the roll count them all, stat of a few names works, after a remount too; the
    database files stay proportional (a safety cap stops a runaway WAL before it fills the disk)."""
    m = mount_factory("big")
    album = m.albums / "Big"
    album.mkdir()
    cap = 64 * MiB + 4096 * BIG_ALBUM
    started = time.monotonic()
    d = os.open(album, os.O_DIRECTORY)
    try:
        for i in range(BIG_ALBUM):
            os.close(os.open(f"IMG_{i:06d}.JPG", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644, dir_fd=d))
            if i % 2000 == 1999:
                size = store_bytes(m.store)
                assert size < cap, (f"after {i + 1} creates the database files take {size / MiB:.0f} MiB "
                                    f"(cap {cap / MiB:.0f} MiB): stopped before the disk fills up")
    finally:
        os.close(d)
    created = time.monotonic() - started
    print(f"{BIG_ALBUM} creates in {created:.1f} s")

    def counts():
        ls = run(["sh", "-c", 'ls "$1" | wc -l', "sh", album], timeout=300).stdout
        found = run(["sh", "-c", 'find "$1" -type f | wc -l', "sh", album], timeout=300).stdout
        roll = run(["sh", "-c", 'ls "$1" | wc -l', "sh", m.roll], timeout=300).stdout
        return int(ls), int(found), int(roll)

    assert counts() == (BIG_ALBUM, BIG_ALBUM, BIG_ALBUM)
    for i in (0, 1, BIG_ALBUM // 2, BIG_ALBUM - 1):
        st = os.stat(album / f"IMG_{i:06d}.JPG")
        assert stat.S_ISREG(st.st_mode) and st.st_size == 0 and st.st_nlink == 2
    expect_errno(errno.ENOENT, os.stat, album / f"IMG_{BIG_ALBUM:06d}.JPG")
    os.unlink(album / "IMG_000000.JPG")
    m.remount()
    assert counts() == (BIG_ALBUM - 1, BIG_ALBUM - 1, BIG_ALBUM)
    assert os.stat(album / f"IMG_{BIG_ALBUM - 1:06d}.JPG").st_nlink == 2
    m.unmount()
    assert_fsck_clean(m.store, f"with {BIG_ALBUM} entries")
