"""Remount, crash and fsck: the store keeps everything (SEMANTICS.md § Durability and safety)."""

import errno
import os
import stat

from albumfs_testlib import (
    albumfs, assert_fsck_clean, bjoin, content_files, content_usage, expect_errno, index_wait, ino, payload, read, sha256,
    run, user_xattrs, write,
)

AS_ROOT = os.geteuid() == 0
ODD = [b"my photo.jpg", b"line\nbreak.jpg", b"\xff\xfe.jpg", "写真.jpg".encode(), "фото.jpg".encode()]


def populate(mount, tmp_path):
    """A library touched by every kind of operation of SEMANTICS.md § What each operation does."""
    roll, al = mount.roll, mount.albums
    paris, family, best = al / "Trips" / "2024" / "Paris", al / "Family", al / "Best"
    run(["mkdir", "-p", paris, family, best])
    write(paris / "IMG_1.JPG", payload(40_000, "paris"))
    write(family / "IMG_1.JPG", payload(41_000, "family"))            # roll: IMG_1 (2).JPG
    write(roll / "big.bin", payload(3 * 1024 * 1024 + 17, "big"))
    write(roll / "empty.txt", b"")
    for i, n in enumerate(ODD):
        write(bjoin(roll if i % 2 else family, n), b"odd %d" % i)
    run(["ln", roll / "big.bin", str(best) + "/"])
    run(["ln", paris / "IMG_1.JPG", best / "paris.jpg"])
    run(["ln", roll / "big.bin", str(family) + "/"])
    run(["rm", family / "big.bin"])                                      # reference removed
    write(roll / "gone.jpg", payload(5000, "gone"))
    run(["ln", roll / "gone.jpg", str(best) + "/"])
    run(["rm", roll / "gone.jpg"])                                       # asset deleted
    write(paris / ".edit.tmp", payload(42_000, "paris v2"))
    os.rename(paris / ".edit.tmp", paris / "IMG_1.JPG")                 # update: takes Best/paris.jpg
    run(["mv", al / "Family", al / "Trips/"])                            # album moved
    run(["mv", best / "big.bin", best / "large.bin"])                    # entry renamed, roll follows
    os.chmod(roll / "large.bin", 0o600)
    os.utime(roll / "large.bin", ns=(1_500_000_000_111_111_111, 1_500_000_000_222_222_222))
    os.setxattr(best / "paris.jpg", "user.rating", b"5")
    os.setxattr(best, "user.cover", b"paris.jpg")
    os.chmod(best, 0o750)
    os.setxattr(mount.albums, "user.note", b"top")
    if AS_ROOT:
        os.chown(roll / "empty.txt", 1234, 5678)
    src = tmp_path / "tree"
    (src / "sub").mkdir(parents=True)
    write(src / "sub" / "r.jpg", payload(9000, "r"))
    write(src / "s.jpg", payload(8000, "s"))
    run(["rsync", "-a", f"{src}/", f"{al / 'Backup'}/"])


def snapshot(mp) -> dict:
    """Everything observable below the mount except atime/ctime (relative bytes path -> facts),
    the computed views included once every file has been read (they follow the facts)."""
    index_wait(mp)
    root = os.fsencode(mp)
    paths = [root]
    for dirpath, dirs, files in os.walk(root):
        paths += [os.path.join(dirpath, n) for n in dirs + files]
    out = {}
    for p in paths:
        st = os.lstat(p)
        facts = {"type": stat.S_IFMT(st.st_mode), "mode": stat.S_IMODE(st.st_mode),
                 "owner": (st.st_uid, st.st_gid), "mtime_ns": st.st_mtime_ns,
                 "xattrs": user_xattrs(p)}
        if stat.S_ISREG(st.st_mode):
            facts.update(ino=st.st_ino, nlink=st.st_nlink, size=st.st_size,
                         sha256=sha256(read(p)),
                         id=os.getxattr(p, "user.albumfs.id"))
        out[os.path.relpath(p, root)] = facts
    return out


def assert_same(before: dict, after: dict):
    assert sorted(after) == sorted(before), "entries differ"
    for k in before:
        assert after[k] == before[k], f"{k!r} changed: {before[k]} -> {after[k]}"


def test_remount_keeps_everything(mount, tmp_path):
    """SEMANTICS.md § Durability and safety: unmount and mount again: names, bytes, inode numbers, modes, times, xattrs identical."""
    populate(mount, tmp_path)
    before = snapshot(mount.mp)
    assert b"Albums/Best/paris.jpg" in before and b"Camera Roll/IMG_1 (2).JPG" in before
    mount.remount()
    assert_same(before, snapshot(mount.mp))

    write(mount.roll / "after.jpg", b"new")
    live = {f["ino"] for f in before.values() if "ino" in f}
    assert ino(mount.roll / "after.jpg") not in live, "a new asset reused a live asset's id"


def test_fsck_clean_after_workload(mount, tmp_path):
    """SEMANTICS.md § Durability and safety: albumfs fsck on the store after all of the above exits 0."""
    populate(mount, tmp_path)
    mount.unmount()
    p = albumfs("fsck", "--store", mount.store, check=False)
    assert p.returncode == 0, f"fsck found problems:\n{p.stdout!r}\n{p.stderr!r}"
    mount.start()
    assert read(mount.albums / "Backup" / "s.jpg") == payload(8000, "s")


def test_fsck_reports_missing_content(mount):
    """fsck: a content file removed behind the store's back → exit 1 with a report."""
    write(mount.roll / "a.jpg", payload(20_000, "a"))
    write(mount.roll / "b.jpg", payload(20_000, "b"))
    mount.unmount()
    files = content_files(mount.store)
    assert len(files) == 2
    os.unlink(files[0])
    p = albumfs("fsck", "--store", mount.store, check=False)
    assert p.returncode == 1, f"fsck exit {p.returncode}: {p.stdout!r} {p.stderr!r}"
    assert (p.stdout + p.stderr).strip(), "fsck must say what it found"


def test_fsck_usage_and_access_errors(tmp_path):
    """fsck: a store that does not exist, or an unknown flag → exit 2."""
    p = albumfs("fsck", "--store", tmp_path / "no-such-store", check=False)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert p.stderr.strip()
    p = albumfs("fsck", "--no-such-flag", check=False)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)


def test_data_survives_kill_9_after_close(mount, tmp_path):
    """Durability: once close() returned, data and entries survive kill -9 of the daemon; fsck then clean."""
    data = payload(1_500_000, "durable")
    write(tmp_path / "d.jpg", data)
    os.mkdir(mount.albums / "A")
    run(["cp", tmp_path / "d.jpg", str(mount.albums / "A") + "/"])
    os.setxattr(mount.roll / "d.jpg", "user.k", b"v")
    asset = ino(mount.roll / "d.jpg")
    mount.kill()

    mount.start()
    assert read(mount.albums / "A" / "d.jpg") == data
    assert ino(mount.roll / "d.jpg") == asset
    assert os.getxattr(mount.albums / "A" / "d.jpg", "user.k") == b"v"
    mount.unmount()
    p = albumfs("fsck", "--store", mount.store, check=False)
    assert p.returncode == 0, f"fsck after crash and remount:\n{p.stdout!r}\n{p.stderr!r}"
    assert content_usage(mount.store)[0] == 1


def test_failed_truncate_changes_nothing(mount):
    """SEMANTICS.md § Durability and safety: a failed call changes nothing. A truncate past the
    largest file the store's filesystem holds fails with EFBIG (as on ext4) and leaves the size,
    the data and the store as they were, also after a remount; fsck finds nothing to repair."""
    album = mount.albums / "A"
    album.mkdir()
    p = album / "p.jpg"
    write(p, b"twelve bytes")
    expect_errno(errno.EFBIG, os.truncate, p, 999_999_999_999_999)
    assert os.stat(p).st_size == 12
    with open(p, "r+b") as f:
        expect_errno(errno.EFBIG, os.ftruncate, f.fileno(), 999_999_999_999_999)
    assert os.stat(p).st_size == 12
    mount.remount()
    assert os.stat(p).st_size == 12
    assert read(p) == b"twelve bytes"
    mount.unmount()
    assert_fsck_clean(mount.store, "after a failed truncate")


def test_fsck_repair_leaves_a_store_a_second_fsck_passes_or_says_why(mount):
    """SEMANTICS.md § Durability and safety: `fsck --repair` fixes what loses no data (a size the data
    does not have gets the data's size) and says, for what it leaves, why; a second fsck then reports
    only what was left."""
    write(mount.roll / "a.jpg", payload(20_000, "a"))
    write(mount.roll / "b.jpg", payload(20_000, "b"))
    ids = {n: ino(mount.roll / n) for n in ("a.jpg", "b.jpg")}
    mount.unmount()
    by_id = {int(os.path.basename(f), 16): f for f in content_files(mount.store)}
    os.truncate(by_id[ids["a.jpg"]], 3)
    os.unlink(by_id[ids["b.jpg"]])
    p = albumfs("fsck", "--store", mount.store, "--repair", check=False, text=True)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    lines = p.stdout.splitlines()
    assert any(f"asset {ids['a.jpg']} " in l and "repaired: set its size to 3" in l for l in lines), p.stdout
    left = [l for l in lines if f"asset {ids['b.jpg']} " in l]
    assert left and "not repaired: " in left[0] and "backup" in left[0], p.stdout
    again = albumfs("fsck", "--store", mount.store, check=False, text=True)
    assert again.returncode == 1, (again.returncode, again.stdout)
    problems = [l for l in again.stdout.splitlines() if " — " in l]
    assert len(problems) == 1 and f"asset {ids['b.jpg']} " in problems[0], again.stdout
