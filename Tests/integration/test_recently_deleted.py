"""Recently Deleted through a real mount: SEMANTICS.md § Recently Deleted, and the file manager's
trash (deleting, restoring with albums, purging, expiry by the store's clock, the update rule,
read-only deleted assets, and a trash that backups never see)."""

from __future__ import annotations

import errno
import os
import stat

import pytest

from albumfs_testlib import (
    NOBODY, all_entries, as_user, content_usage, expect_errno, ino, names, nlink, payload, public_tmpdir,
    read, run, write,
)

DAY = 86_400


def deleted(m, name=None):
    d = m.mp / "Recently Deleted"
    return d if name is None else d / name


def test_rm_moves_to_recently_deleted_and_mv_restores_with_albums(mount):
    """rm "Camera Roll/x" (x in A and B): gone from the roll, A and B at once; in Recently Deleted
    with the same inode, nlink 1; statfs still counts it. mv it back: roll, A and B, same names.
    Again with B removed meanwhile and another asset now called x in A: mv to "Camera Roll/y"
    restores it as y, in A as "x (2)", not in B, no error."""
    a, b = mount.albums / "A", mount.albums / "B"
    a.mkdir()
    b.mkdir()
    data = payload(50_000, "x")
    write(a / "x.jpg", data)
    os.link(a / "x.jpg", b / "x.jpg")
    x = ino(mount.roll / "x.jpg")
    for p in (a / "x.jpg", b / "x.jpg", mount.roll / "x.jpg"):
        assert nlink(p) == 3   # cached by the kernel before the delete
    names(a), names(b), names(mount.roll)
    assets_before = os.statvfs(mount.mp)

    run(["rm", mount.roll / "x.jpg"])
    assert names(mount.roll) == [] and names(a) == [] and names(b) == []
    for p in (a / "x.jpg", b / "x.jpg", mount.roll / "x.jpg"):
        expect_errno(errno.ENOENT, os.stat, p)
    assert names(deleted(mount)) == ["x.jpg"]
    assert ino(deleted(mount, "x.jpg")) == x and nlink(deleted(mount, "x.jpg")) == 1
    assert read(deleted(mount, "x.jpg")) == data
    after = os.statvfs(mount.mp)
    assert after.f_files - after.f_ffree == assets_before.f_files - assets_before.f_ffree == 1

    run(["mv", deleted(mount, "x.jpg"), str(mount.roll) + "/"])
    assert names(deleted(mount)) == []
    assert ino(mount.roll / "x.jpg") == ino(a / "x.jpg") == ino(b / "x.jpg") == x
    assert nlink(mount.roll / "x.jpg") == 3

    run(["rm", mount.roll / "x.jpg"])
    os.rmdir(b)
    write(a / "x.jpg", payload(10, "other"))
    other = ino(a / "x.jpg")
    run(["mv", deleted(mount, "x.jpg"), mount.roll / "y.jpg"])
    assert ino(mount.roll / "y.jpg") == x
    assert ino(a / "x (2).jpg") == x
    assert ino(a / "x.jpg") == ino(mount.roll / "x.jpg") == other
    assert not b.exists()
    assert nlink(mount.roll / "y.jpg") == 2


def test_restore_onto_a_taken_roll_name_replaces_it(mount):
    """mv "Recently Deleted/x" onto a roll entry: replaced as any rename does (to Recently Deleted)."""
    write(mount.roll / "x", b"first")
    first = ino(mount.roll / "x")
    os.unlink(mount.roll / "x")
    write(mount.roll / "x", b"second")
    second = ino(mount.roll / "x")
    os.rename(deleted(mount, "x"), mount.roll / "x")
    assert ino(mount.roll / "x") == first and read(mount.roll / "x") == b"first"
    assert ino(deleted(mount, "x")) == second


def test_mv_from_recently_deleted_into_an_album(mount):
    """mv "Recently Deleted/x" Albums/C/: back in the roll and its old albums, and in C as well."""
    (mount.albums / "A").mkdir()
    (mount.albums / "C").mkdir()
    write(mount.albums / "A" / "x", b"x")
    x = ino(mount.roll / "x")
    os.unlink(mount.roll / "x")
    run(["mv", deleted(mount, "x"), str(mount.albums / "C") + "/"])
    assert ino(mount.albums / "C" / "x") == ino(mount.albums / "A" / "x") == ino(mount.roll / "x") == x
    assert nlink(mount.roll / "x") == 3


def test_rm_in_recently_deleted_frees_the_space(mount):
    """rm "Recently Deleted/x" purges it: the store's content shrinks by the file's size at once."""
    data = payload(3_000_000, "big")
    write(mount.roll / "big.jpg", data)
    os.unlink(mount.roll / "big.jpg")
    count, size = content_usage(mount.store)
    os.unlink(deleted(mount, "big.jpg"))
    count_after, size_after = content_usage(mount.store)
    assert size - size_after >= len(data)
    assert names(deleted(mount)) == []
    after = os.statvfs(mount.mp)
    assert after.f_files - after.f_ffree == 0, "statfs counts no asset once it is purged"


def test_trash_days_0_deletes_at_once_and_offers_no_trash(mount_factory):
    """-o trash_days=0: rm in the roll frees at once; no .Trash-UID, so file managers ask first."""
    m = mount_factory("m", options=["trash_days=0"])
    write(m.roll / "x", payload(100_000, "x"))
    os.unlink(m.roll / "x")
    assert names(deleted(m)) == []
    assert content_usage(m.store)[0] == 0
    expect_errno(errno.ENOENT, os.stat, m.mp / f".Trash-{os.getuid()}")
    expect_errno(errno.EPERM, os.mkdir, m.mp / f".Trash-{os.getuid()}")


def test_expiry_by_the_store_clock_at_mount(mount_factory):
    """An asset deleted more than trash_days ago by the store's clock is purged at the next mount
    (the clock moved with ALBUMFS_CLOCK_OFFSET, not by sleeping); a recent one stays."""
    m = mount_factory("m", env={"ALBUMFS_CLOCK_OFFSET": str(-31 * DAY)})
    write(m.roll / "old.jpg", payload(200_000, "old"))
    os.unlink(m.roll / "old.jpg")
    purge = os.getxattr(deleted(m, "old.jpg"), "user.albumfs.purge").decode()
    assert purge.endswith("Z")
    m.unmount()
    m.env = {}
    m.start()
    write(m.roll / "new.jpg", b"new")
    os.unlink(m.roll / "new.jpg")
    assert names(deleted(m)) == ["new.jpg"], "the old asset expired while unmounted: purged at mount"
    assert content_usage(m.store)[0] == 1, "only the new asset's data is left (a .trashinfo albumfs " \
        "wrote stays in the database until something opens it)"
    m.unmount()
    m.env = {"ALBUMFS_CLOCK_OFFSET": str(29 * DAY)}
    m.start()
    assert names(deleted(m)) == ["new.jpg"], "29 days: kept"
    m.unmount()
    m.start(["trash_days=7"])
    assert names(deleted(m)) == [], "trash_days=7 and 29 days: purged"


def test_update_rule_keeps_albums_and_the_replaced_asset_is_restorable(mount):
    """rsync/GIO "Replace" in an album: the new file keeps the albums; the first version is kept
    as the original (SEMANTICS.md § Edits keep the original), not in Recently Deleted; a second
    update's replaced version is in Recently Deleted with no albums, and restores into the roll
    only."""
    a, b = mount.albums / "A", mount.albums / "B"
    a.mkdir()
    b.mkdir()
    write(a / "p.jpg", b"first version")
    os.link(a / "p.jpg", b / "p.jpg")
    first = ino(a / "p.jpg")
    write(a / ".p.jpg.tmp", b"old version")
    os.rename(a / ".p.jpg.tmp", a / "p.jpg")
    old = ino(a / "p.jpg")
    assert names(deleted(mount)) == []
    assert ino(mount.mp / "Smart Albums" / "Originals" / "p.jpg") == first
    write(a / ".p.jpg.tmp", b"new version")
    os.rename(a / ".p.jpg.tmp", a / "p.jpg")
    new = ino(a / "p.jpg")
    assert ino(b / "p.jpg") == ino(mount.roll / "p.jpg") == new
    assert ino(deleted(mount, "p.jpg")) == old and nlink(deleted(mount, "p.jpg")) == 1
    os.rename(deleted(mount, "p.jpg"), mount.roll / "p-old.jpg")
    assert read(mount.roll / "p-old.jpg") == b"old version"
    assert nlink(mount.roll / "p-old.jpg") == 1
    assert names(a) == ["p.jpg"] and names(b) == ["p.jpg"]
    assert read(mount.mp / "Smart Albums" / "Originals" / "p.jpg") == b"first version"


def test_deleted_assets_are_readable_and_otherwise_read_only(mount, tmp_path):
    """Reading, copying out: works. Open for writing, truncate, chmod, chown, touch, setfattr,
    and anything created in Recently Deleted: EPERM."""
    write(mount.roll / "x.jpg", b"keep me")
    os.unlink(mount.roll / "x.jpg")
    d = deleted(mount, "x.jpg")
    run(["cp", d, tmp_path / "out.jpg"])
    assert (tmp_path / "out.jpg").read_bytes() == b"keep me"
    expect_errno(errno.EPERM, os.open, d, os.O_WRONLY)
    expect_errno(errno.EPERM, os.truncate, d, 0)
    expect_errno(errno.EPERM, os.chmod, d, 0o600)
    expect_errno(errno.EPERM, os.chown, d, 1, 1)
    expect_errno(errno.EPERM, os.utime, d, (1, 1))
    expect_errno(errno.EPERM, os.setxattr, d, "user.a", b"v")
    expect_errno(errno.EPERM, os.open, deleted(mount, "new"), os.O_CREAT | os.O_WRONLY, 0o644)
    expect_errno(errno.EPERM, os.mkdir, deleted(mount, "dir"))
    assert read(d) == b"keep me"
    assert os.getxattr(d, "user.albumfs.deleted").decode() < os.getxattr(d, "user.albumfs.purge").decode()


def test_the_trash_is_never_listed_nor_backed_up(mount, tmp_path):
    """ls -a, find, du -s and rsync -a of the mount never see .Trash-UID (looked up and used)."""
    write(mount.roll / "x.jpg", b"x")
    os.unlink(mount.roll / "x.jpg")   # albumfs puts it in .Trash-0 and writes its .trashinfo
    trash = mount.mp / f".Trash-{os.getuid()}"
    assert sorted(os.listdir(trash / "files")) == ["x.jpg"]
    assert sorted(os.listdir(trash / "info")) == ["x.jpg.trashinfo"]
    assert stat.S_IMODE(os.stat(trash).st_mode) == 0o700
    ls = run(["ls", "-a1", mount.mp], text=True).stdout.splitlines()
    assert ".Trash-0" not in ls and sorted(ls) == [".", "..", "Albums", "By Date", "Camera Roll", "Hidden",
                                                 "Recently Deleted", "Smart Albums"]
    found = run(["find", mount.mp], text=True).stdout
    assert ".Trash" not in found
    out = tmp_path / "backup"
    run(["rsync", "-a", str(mount.mp) + "/", str(out) + "/"])
    assert sorted(os.listdir(out)) == ["Albums", "By Date", "Camera Roll", "Hidden", "Recently Deleted", "Smart Albums"]
    du = run(["du", "-a", mount.mp], text=True).stdout
    assert ".Trash" not in du


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another uid needs root")
def test_one_users_trash_is_not_reachable_by_another(mount_factory):
    """With allow_other, nobody cannot enter root's .Trash-0 (EACCES), and gets no trash made for
    root by looking; nobody's own .Trash-65534 is made on nobody's first lookup, owned by nobody."""
    with public_tmpdir() as pub:
        m = mount_factory("m", base=pub / "m", options=["allow_other"])
        os.chmod(m.mp, 0o755)
        (m.albums / "Shared").mkdir(mode=0o777)
        os.chmod(m.albums / "Shared", 0o777)
        os.stat(m.mp / ".Trash-0")
        p = as_user(["ls", m.mp / ".Trash-0" / "files"])
        assert p.returncode != 0 and "Permission denied" in p.stderr, p
        p = as_user(["stat", "-c", "%u %a", m.mp / f".Trash-{NOBODY}"])
        assert p.returncode == 0 and p.stdout.split() == [str(NOBODY), "700"], p
        assert as_user(["ls", m.mp / f".Trash-{NOBODY}" / "files"]).returncode == 0
        m.unmount()
