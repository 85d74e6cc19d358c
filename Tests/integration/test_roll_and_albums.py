"""Camera Roll and albums: create, collision names, ln, rm (issue 2 items 1-6)."""

import errno
import os
import stat
import time

import pytest

from albumfs_testlib import (
    all_entries, bjoin, bnames, content_usage, current_umask, expect_errno, ino, names,
    nlink, payload, read, run, write,
)


def test_cp_into_roll_creates_one_asset(mount, tmp_path):
    """Item 1: cp photo.jpg into the roll → one asset, cmp identical, stat shows size, mode, owner, times."""
    src = tmp_path / "photo.jpg"
    data = payload(300_000, "photo")
    write(src, data)
    os.chmod(src, 0o640)
    assert content_usage(mount.store)[0] == 0
    t0 = time.time()
    run(["cp", src, str(mount.roll) + "/"])
    t1 = time.time()

    dst = mount.roll / "photo.jpg"
    assert names(mount.roll) == ["photo.jpg"]
    assert names(mount.albums) == []
    count, size = content_usage(mount.store)
    assert count == 1 and size >= len(data), "one asset, holding the file's bytes"
    run(["cmp", src, dst])

    st = os.stat(dst)
    assert stat.S_ISREG(st.st_mode)
    assert st.st_size == len(data)
    assert stat.S_IMODE(st.st_mode) == 0o640 & ~current_umask()
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())
    assert st.st_nlink == 1
    for t in (st.st_mtime, st.st_ctime, st.st_atime):
        assert t0 - 2 <= t <= t1 + 2, f"time {t} not within the copy ({t0}..{t1})"


def test_cp_into_album_adds_to_roll(mount, tmp_path):
    """Item 2: cp into Albums/Trip → entry in Trip and in the roll, same st_ino, st_nlink 2."""
    src = tmp_path / "a.jpg"
    data = payload(100_000, "a")
    write(src, data)
    trip = mount.albums / "Trip"
    run(["mkdir", trip])
    # Look the roll name up first: a cached negative entry must not hide the new roll entry.
    assert not (mount.roll / "a.jpg").exists()
    run(["cp", src, str(trip) + "/"])

    assert names(trip) == ["a.jpg"]
    assert names(mount.roll) == ["a.jpg"]
    in_album, in_roll = os.stat(trip / "a.jpg"), os.stat(mount.roll / "a.jpg")
    assert in_album.st_ino == in_roll.st_ino
    assert in_album.st_nlink == in_roll.st_nlink == 2
    run(["cmp", src, mount.roll / "a.jpg"])
    run(["cmp", src, trip / "a.jpg"])
    assert content_usage(mount.store)[0] == 1


def test_same_name_in_two_albums_gets_numbered_roll_name(mount, tmp_path):
    """Item 3: two different IMG_1.JPG into two albums → roll IMG_1.JPG and 'IMG_1 (2).JPG'."""
    d1, d2 = payload(5000, 1), payload(6000, 2)
    (tmp_path / "s1").mkdir()
    (tmp_path / "s2").mkdir()
    write(tmp_path / "s1" / "IMG_1.JPG", d1)
    write(tmp_path / "s2" / "IMG_1.JPG", d2)
    a, b = mount.albums / "A", mount.albums / "B"
    os.mkdir(a)
    os.mkdir(b)
    run(["cp", tmp_path / "s1" / "IMG_1.JPG", str(a) + "/"])
    run(["cp", tmp_path / "s2" / "IMG_1.JPG", str(b) + "/"])

    assert names(mount.roll) == ["IMG_1 (2).JPG", "IMG_1.JPG"]
    assert names(a) == ["IMG_1.JPG"] and names(b) == ["IMG_1.JPG"]
    assert read(a / "IMG_1.JPG") == d1 and read(b / "IMG_1.JPG") == d2
    assert ino(mount.roll / "IMG_1.JPG") == ino(a / "IMG_1.JPG")
    assert ino(mount.roll / "IMG_1 (2).JPG") == ino(b / "IMG_1.JPG")
    assert read(mount.roll / "IMG_1 (2).JPG") == d2
    assert ino(a / "IMG_1.JPG") != ino(b / "IMG_1.JPG")


@pytest.mark.parametrize("name, second", [
    (b"IMG_1.JPG", b"IMG_1 (2).JPG"),
    (b"a.tar.gz", b"a.tar (2).gz"),
    (b".hidden", b".hidden (2)"),
    (b"noext", b"noext (2)"),
    (b"x" * 251 + b".JPG", b"x" * 247 + b" (2).JPG"),            # 255 bytes: stem shortened
    ("é".encode() * 125 + b".jpg", "é".encode() * 123 + b" (2).jpg"),  # at a UTF-8 boundary
    (b"\xff" * 251 + b".jpg", b"\xff" * 247 + b" (2).jpg"),      # invalid UTF-8: at a byte
    (b"y" * 255, b"y" * 251 + b" (2)"),
], ids=["IMG_1.JPG", "a.tar.gz", ".hidden", "noext", "255-ascii", "254-utf8", "255-invalid", "255-noext"])
def test_roll_collision_name_form(mount, name, second):
    """Create row: the roll name of a clashing album create is the '(2)' form, ext at the last non-first '.'."""
    a, b = mount.albums / "A", mount.albums / "B"
    os.mkdir(a)
    os.mkdir(b)
    if name.startswith(b"."):
        # A new file under a dot name is a side file (SEMANTICS.md § side files): assets get
        # such names by rename, and the roll entry follows with the same (n) rule.
        for album, data in ((a, b"first"), (b, b"second")):
            write(bjoin(album, b"tmp"), data)
            os.rename(bjoin(album, b"tmp"), bjoin(album, name))
    else:
        write(bjoin(a, name), b"first")
        write(bjoin(b, name), b"second")
    assert bnames(mount.roll) == sorted([name, second])
    assert read(bjoin(mount.roll, second)) == b"second"
    assert os.stat(bjoin(mount.roll, second)).st_ino == os.stat(bjoin(b, name)).st_ino
    assert bnames(b) == [name]


def test_roll_collision_takes_first_free_number(mount):
    """Create row: with 'x', 'x (2)' taken, the next clashing album create gets 'x (3)'."""
    write(mount.roll / "IMG.JPG", b"1")
    write(mount.roll / "IMG (2).JPG", b"2")
    os.mkdir(mount.albums / "A")
    write(mount.albums / "A" / "IMG.JPG", b"3")
    assert names(mount.roll) == ["IMG (2).JPG", "IMG (3).JPG", "IMG.JPG"]
    assert read(mount.roll / "IMG (3).JPG") == b"3"
    os.mkdir(mount.albums / "B")
    write(mount.albums / "B" / "IMG.JPG", b"4")
    assert read(mount.roll / "IMG (4).JPG") == b"4"


def test_ln_adds_without_copying(mount, tmp_path):
    """Item 4: ln roll/a.jpg Albums/Best/ adds with no data copied (store size same, nlink 3); twice → EEXIST."""
    data = payload(200_000, "a")
    write(tmp_path / "a.jpg", data)
    run(["cp", tmp_path / "a.jpg", str(mount.roll) + "/"])
    trip, best = mount.albums / "Trip", mount.albums / "Best"
    run(["mkdir", trip, best])
    run(["ln", mount.roll / "a.jpg", str(trip) + "/"])
    usage = content_usage(mount.store)
    assert usage[0] == 1

    run(["ln", mount.roll / "a.jpg", str(best) + "/"])
    assert content_usage(mount.store) == usage, "ln must not copy data"
    for p in (mount.roll / "a.jpg", trip / "a.jpg", best / "a.jpg"):
        assert nlink(p) == 3
        assert ino(p) == ino(mount.roll / "a.jpg")
    assert read(best / "a.jpg") == data

    again = run(["ln", mount.roll / "a.jpg", str(best) + "/"], check=False)
    assert again.returncode != 0
    # Already in Best under another name: still EEXIST (an album holds an asset at most once).
    expect_errno(errno.EEXIST, os.link, mount.roll / "a.jpg", best / "other.jpg")
    expect_errno(errno.EEXIST, os.link, trip / "a.jpg", best / "other.jpg")
    assert names(best) == ["a.jpg"]
    assert nlink(mount.roll / "a.jpg") == 3
    assert content_usage(mount.store) == usage


def test_ln_between_albums_under_new_name(mount):
    """ln row: ln Albums/B/x Albums/A/y adds the asset to A as y; the roll entry keeps its name."""
    a, b = mount.albums / "A", mount.albums / "B"
    os.mkdir(a)
    os.mkdir(b)
    write(b / "x.jpg", b"x-data")
    run(["ln", b / "x.jpg", a / "y.jpg"])
    assert names(a) == ["y.jpg"]
    assert names(mount.roll) == ["x.jpg"]
    assert ino(a / "y.jpg") == ino(b / "x.jpg") == ino(mount.roll / "x.jpg")
    assert nlink(a / "y.jpg") == 3


def test_ln_into_roll_is_eexist(mount):
    """ln row: ln into the roll → EEXIST (every asset is already there)."""
    os.mkdir(mount.albums / "A")
    write(mount.albums / "A" / "x.jpg", b"x")
    expect_errno(errno.EEXIST, os.link, mount.albums / "A" / "x.jpg", mount.roll / "new.jpg")
    expect_errno(errno.EEXIST, os.link, mount.roll / "x.jpg", mount.roll / "new.jpg")
    assert names(mount.roll) == ["x.jpg"]
    assert nlink(mount.roll / "x.jpg") == 2


def test_rm_album_entry_removes_reference_only(mount, tmp_path):
    """Item 5: rm Albums/Trip/a.jpg → gone from Trip only; roll and Best keep it; st_nlink drops."""
    data = payload(50_000, "a")
    trip, best = mount.albums / "Trip", mount.albums / "Best"
    os.mkdir(trip)
    os.mkdir(best)
    write(trip / "a.jpg", data)
    os.link(mount.roll / "a.jpg", best / "a.jpg")
    assert nlink(mount.roll / "a.jpg") == 3
    usage = content_usage(mount.store)

    run(["rm", trip / "a.jpg"])
    assert names(trip) == []
    assert names(mount.roll) == ["a.jpg"] and names(best) == ["a.jpg"]
    assert nlink(mount.roll / "a.jpg") == 2 and nlink(best / "a.jpg") == 2
    assert read(mount.roll / "a.jpg") == data
    assert content_usage(mount.store) == usage


def test_rm_roll_entry_deletes_everywhere_and_frees_content(mount):
    """SEMANTICS.md § Recently Deleted: rm roll/a.jpg → at once gone from the roll and every album,
    in Recently Deleted (same inode, nlink 1, still counted by statfs); rm there frees its content."""
    a_data, b_data = payload(70_000, "a"), payload(30_000, "b")
    trip, best = mount.albums / "Trip", mount.albums / "Best"
    os.mkdir(trip)
    os.mkdir(best)
    write(trip / "a.jpg", a_data)
    os.link(mount.roll / "a.jpg", best / "best.jpg")
    write(trip / "b.jpg", b_data)
    before = content_usage(mount.store)
    assert before[0] == 2
    # Fill the kernel's caches with the entries about to disappear.
    a_ino = ino(mount.roll / "a.jpg")
    for p in (trip / "a.jpg", best / "best.jpg", mount.roll / "a.jpg"):
        assert os.stat(p).st_nlink == 3
    names(trip), names(best), names(mount.roll)

    run(["rm", mount.roll / "a.jpg"])
    assert names(mount.roll) == ["b.jpg"]
    assert names(trip) == ["b.jpg"]
    assert names(best) == []
    expect_errno(errno.ENOENT, os.stat, trip / "a.jpg")
    expect_errno(errno.ENOENT, os.stat, best / "best.jpg")
    expect_errno(errno.ENOENT, os.stat, mount.roll / "a.jpg")
    assert a_ino not in all_entries(mount.mp).values()
    deleted = mount.mp / "Recently Deleted" / "a.jpg"
    assert ino(deleted) == a_ino and nlink(deleted) == 1
    assert read(deleted) == a_data
    files = os.statvfs(mount.mp)
    assert files.f_files - files.f_ffree == 2, "statfs counts a deleted asset until it is purged"
    assert nlink(trip / "b.jpg") == 2

    run(["rm", deleted])
    assert names(mount.mp / "Recently Deleted") == []
    count, size = content_usage(mount.store)
    assert count == 1 and size <= before[1] - len(a_data), "the purged asset's content must be freed"
    files = os.statvfs(mount.mp)
    assert files.f_files - files.f_ffree == 1


def test_names_a_lookup_missed_appear_once_made(mount):
    """A name looked up and missed must show once it exists, also when it appears through
    another directory: a create in an album adds a roll entry, a rename in an album renames
    the roll entry. (Guards against caching misses where names appear behind the kernel's
    back: caching the roll's makes this fail.)"""
    album, other = mount.albums / "A", mount.albums / "B"
    album.mkdir()
    other.mkdir()
    for path in (mount.roll / "new.jpg", album / "new.jpg", mount.roll / "renamed.jpg",
                 album / "renamed.jpg", album / "moved.jpg", album / "linked.jpg"):
        assert not path.exists()
    (album / "new.jpg").write_bytes(b"x")
    assert (mount.roll / "new.jpg").read_bytes() == b"x"
    os.rename(album / "new.jpg", album / "renamed.jpg")
    assert (album / "renamed.jpg").exists() and not (album / "new.jpg").exists()
    assert (mount.roll / "renamed.jpg").exists()      # the roll entry followed the album entry
    (other / "moved.jpg").write_bytes(b"y")
    os.rename(other / "moved.jpg", album / "moved.jpg")
    assert (album / "moved.jpg").read_bytes() == b"y"
    (mount.roll / "c.jpg").write_bytes(b"c")
    os.link(mount.roll / "c.jpg", album / "linked.jpg")
    assert (album / "linked.jpg").read_bytes() == b"c"
    assert not (mount.roll / "missing.jpg").exists()
    (mount.roll / "missing.jpg").write_bytes(b"z")
    assert (mount.roll / "missing.jpg").exists()
