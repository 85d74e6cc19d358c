"""One asset seen through many entries: writes, attributes, xattrs, statfs (issue 2 items 9-10)."""

import errno
import os
import stat
import time

import pytest

from albumfs_testlib import (
    current_umask, expect_errno, index_wait, ino, names, payload, read, run, write,
)

AS_ROOT = os.geteuid() == 0


@pytest.fixture
def shared(mount):
    """One asset in the roll as p.jpg and in albums A and B (B under another name)."""
    a, b = mount.albums / "A", mount.albums / "B"
    os.mkdir(a)
    os.mkdir(b)
    write(a / "p.jpg", payload(10_000, "p"))
    os.link(a / "p.jpg", b / "bp.jpg")
    paths = [mount.roll / "p.jpg", a / "p.jpg", b / "bp.jpg"]
    for p in paths:  # fill the kernel's page and attribute caches of every entry
        read(p)
        os.stat(p)
    return paths


def assert_all_show(paths, data):
    for p in paths:
        assert os.stat(p).st_size == len(data), f"{p}: size"
        assert read(p) == data, f"{p}: content"


def test_write_through_one_album_seen_everywhere(shared, tmp_path):
    """Item 9: overwrite, append, truncate and replace through one entry are seen through all of them."""
    roll, a, b = shared
    data = bytearray(read(roll))

    with open(a, "r+b") as f:          # overwrite in place through album A
        f.seek(100)
        f.write(b"HELLO")
    data[100:105] = b"HELLO"
    assert_all_show(shared, bytes(data))

    with open(b, "ab") as f:           # append through album B
        f.write(b"tail" * 1000)
    data += b"tail" * 1000
    assert_all_show(shared, bytes(data))

    os.truncate(roll, 500)             # shrink through the roll
    data = data[:500]
    assert_all_show(shared, bytes(data))

    os.truncate(a, 3000)               # grow through A: zeros
    data += bytes(2500)
    assert_all_show(shared, bytes(data))

    replacement = tmp_path / "new.jpg"  # cp over an existing entry (O_TRUNC) through B
    write(replacement, payload(7000, "replacement"))
    run(["cp", replacement, b])
    for p in shared:
        run(["cmp", replacement, p])
    assert len({ino(p) for p in shared}) == 1


def test_metadata_change_through_one_entry_seen_everywhere(shared):
    """Ops row: chmod, chown, touch, setfattr on any entry change the one asset."""
    roll, a, b = shared
    os.chmod(b, 0o600)
    assert all(stat.S_IMODE(os.stat(p).st_mode) == 0o600 for p in shared)
    os.utime(a, ns=(1_400_000_000_000_000_001, 1_400_000_000_987_654_321))
    assert all(os.stat(p).st_mtime_ns == 1_400_000_000_987_654_321 for p in shared)
    assert all(os.stat(p).st_atime_ns == 1_400_000_000_000_000_001 for p in shared)
    run(["touch", "-d", "@1614834367", roll])
    assert all(os.stat(p).st_mtime_ns == 1_614_834_367_000_000_000 for p in shared)
    run(["setfattr", "-n", "user.k", "-v", "v", a])
    assert all(os.getxattr(p, "user.k") == b"v" for p in shared)
    if AS_ROOT:
        os.chown(roll, 1234, 5678)
        assert all((os.stat(p).st_uid, os.stat(p).st_gid) == (1234, 5678) for p in shared)


def test_new_file_attributes(mount):
    """Attributes: a new file gets create's mode less the umask and the creator's uid/gid."""
    fd = os.open(mount.roll / "n.jpg", os.O_CREAT | os.O_WRONLY, 0o666)
    os.close(fd)
    st = os.stat(mount.roll / "n.jpg")
    assert stat.S_IMODE(st.st_mode) == 0o666 & ~current_umask()
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())
    old = os.umask(0o077)
    try:
        fd = os.open(mount.roll / "private.jpg", os.O_CREAT | os.O_WRONLY, 0o666)
        os.close(fd)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(mount.roll / "private.jpg").st_mode) == 0o600


def test_user_xattr_round_trip(shared):
    """Item 10: setfattr -n user.k -v v / getfattr round-trip, across entries; removal; 64 KiB values."""
    roll, a, b = shared
    run(["setfattr", "-n", "user.k", "-v", "v", a])
    out = run(["getfattr", "--absolute-names", "--only-values", "-n", "user.k", b]).stdout
    assert out == b"v"
    dump = run(["getfattr", "--absolute-names", "-d", roll], text=True).stdout
    assert 'user.k="v"' in dump
    assert "user.k" in os.listxattr(roll)

    big = payload(65536, "xattr")
    os.setxattr(roll, "user.big", big)
    assert os.getxattr(b, "user.big") == big

    run(["setfattr", "-x", "user.k", roll])
    expect_errno(errno.ENODATA, os.getxattr, a, "user.k")
    assert "user.k" not in os.listxattr(a)


def test_albumfs_id_xattr(shared, mount):
    """Item 10: getfattr -n user.albumfs.id gives the asset id (= st_ino); not listed; read-only (EPERM)."""
    roll, a, b = shared
    asset_id = ino(roll)
    for p in shared:
        out = run(["getfattr", "--absolute-names", "--only-values", "-n", "user.albumfs.id", p]).stdout
        assert out == str(asset_id).encode()
        assert os.getxattr(p, "user.albumfs.id") == str(asset_id).encode()
        assert not any(k.startswith("user.albumfs.") for k in os.listxattr(p))
    dump = run(["getfattr", "--absolute-names", "-d", "-m", "-", roll], text=True).stdout
    assert "albumfs" not in dump
    expect_errno(errno.EPERM, os.setxattr, a, "user.albumfs.id", b"1")
    expect_errno(errno.EPERM, os.removexattr, a, "user.albumfs.id")
    assert os.getxattr(roll, "user.albumfs.id") == str(asset_id).encode()

    write(mount.roll / "other.jpg", b"other")
    other = os.getxattr(mount.roll / "other.jpg", "user.albumfs.id")
    assert other == str(ino(mount.roll / "other.jpg")).encode() and other != str(asset_id).encode()


def test_other_xattr_namespace_is_enotsup(shared):
    """Attributes: namespaces other than user.* → ENOTSUP."""
    roll = shared[0]
    if not AS_ROOT:
        pytest.skip("trusted.* is root-only (CI runs as root)")
    expect_errno(errno.ENOTSUP, os.setxattr, roll, "trusted.k", b"v")


def test_fixed_directories_attributes(mount):
    """Layout: root and fixed dirs are 0755, owned by the mounting user; chmod, touch, user xattrs work."""
    for d in (mount.mp, mount.roll, mount.albums):
        st = os.stat(d)
        assert stat.S_ISDIR(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o755, f"{d}: {oct(st.st_mode)}"
        assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())
    assert {"Albums", "Camera Roll"} <= set(names(mount.mp))
    os.chmod(mount.albums, 0o700)
    os.utime(mount.albums, ns=(1_300_000_000_000_000_000, 1_300_000_000_000_000_123))
    os.setxattr(mount.albums, "user.note", b"mine")
    os.setxattr(mount.roll, "user.note", b"roll")
    st = os.stat(mount.albums)
    assert stat.S_IMODE(st.st_mode) == 0o700
    assert st.st_mtime_ns == 1_300_000_000_000_000_123
    assert os.getxattr(mount.albums, "user.note") == b"mine"
    assert os.getxattr(mount.roll, "user.note") == b"roll"


def test_album_directory_attributes(mount):
    """Attributes: albums have their own mode, owner, times and user xattrs."""
    a = mount.albums / "A"
    os.mkdir(a, 0o777)
    assert stat.S_IMODE(os.stat(a).st_mode) == 0o777 & ~current_umask()
    os.chmod(a, 0o710)
    os.utime(a, ns=(1_200_000_000_000_000_000, 1_200_000_000_000_000_456))
    os.setxattr(a, "user.cover", b"p.jpg")
    if AS_ROOT:
        os.chown(a, 2000, 3000)
    st = os.stat(a)
    assert stat.S_IMODE(st.st_mode) == 0o710
    assert st.st_mtime_ns == 1_200_000_000_000_000_456
    assert os.getxattr(a, "user.cover") == b"p.jpg"
    if AS_ROOT:
        assert (st.st_uid, st.st_gid) == (2000, 3000)


def test_hard_link_view(shared, mount):
    """Entries: st_ino is the asset id in every directory and st_nlink = 1 + albums; find -samefile sees
    them, the computed By Date entry too once the asset is read (SEMANTICS.md § What albumfs knows of each
    asset: computed within a few seconds of close, so index --wait first)."""
    roll, a, b = shared
    assert {os.stat(p).st_ino for p in shared} == {ino(roll)}
    assert all(os.stat(p).st_nlink == 3 for p in shared)
    index_wait(mount.mp)
    month = time.localtime(os.stat(roll).st_mtime)   # no capture date in the file: its mtime, local time
    by_date = mount.mp / "By Date" / time.strftime("%Y", month) / time.strftime("%Y-%m", month) / roll.name
    found = run(["find", mount.mp, "-samefile", roll], text=True).stdout.splitlines()
    assert sorted(found) == sorted(str(p) for p in [*shared, by_date])


def test_statfs(mount):
    """Attributes: statfs f_namemax is 255, f_files − f_ffree counts assets, free space is the store's."""
    st = os.statvfs(mount.mp)
    assert st.f_namemax == 255
    assert st.f_files - st.f_ffree == 0
    os.mkdir(mount.albums / "A")
    write(mount.roll / "one.jpg", b"1")
    write(mount.albums / "A" / "two.jpg", b"2")
    os.link(mount.roll / "one.jpg", mount.albums / "A" / "one.jpg")
    st = os.statvfs(mount.mp)
    assert st.f_files - st.f_ffree == 2
    store = os.statvfs(mount.store)
    mount_free, store_free = st.f_bavail * st.f_frsize, store.f_bavail * store.f_frsize
    assert abs(mount_free - store_free) <= max(256 * 1024 * 1024, store_free // 20), \
        f"mount reports {mount_free} bytes free, the store's file system {store_free}"
