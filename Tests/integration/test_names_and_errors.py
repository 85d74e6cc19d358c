"""Names are bytes; what the library refuses (issue 2 item 13, names and errno part)."""

import errno
import os
import stat

import pytest

from albumfs_testlib import bjoin, bnames, create, expect_errno, names, read, run, write

AS_ROOT = os.geteuid() == 0

ODD_NAMES = {
    "spaces": b"my photo 1 .jpg",
    "leading-space": b" lead.jpg",
    "newline": b"line\nbreak.jpg",
    "tab": b"tab\there.jpg",
    "invalid-utf8": b"\xff\xfe.jpg",
    "lone-continuation": b"ab\x80cd.jpg",
    "cjk": "写真 2024.jpg".encode(),
    "cyrillic": "фото.jpg".encode(),
    "emoji": "🌅.heic".encode(),
    "dash": b"-rf.jpg",
    "backslash-quote": b"a\\b'c\"d.jpg",
    "looks-numbered": b"x (2).jpg",
    "255-bytes": b"n" * 251 + b".jpg",
    "255-bytes-utf8": "ж".encode() * 125 + b".jpeg",
}


@pytest.mark.parametrize("name", list(ODD_NAMES.values()), ids=list(ODD_NAMES))
def test_name_round_trips_byte_exact(mount, tmp_path, name):
    """Item 13: names with spaces, newlines, invalid UTF-8, other scripts round-trip byte for byte."""
    assert len(name) <= 255
    data = b"data of " + name
    src = bjoin(tmp_path, name)
    write(src, data)
    album = mount.albums / "A"
    os.mkdir(album)
    run([b"cp", src, os.fsencode(album) + b"/"])       # through a real tool, bytes argv
    assert bnames(album) == [name]
    assert bnames(mount.roll) == [name]
    assert read(bjoin(mount.roll, name)) == data
    found = run(["find", mount.roll, "-type", "f", "-print0"]).stdout
    assert found == bjoin(mount.roll, name) + b"\0"

    os.rename(bjoin(album, name), bjoin(album, b"plain.jpg"))   # the roll entry follows ...
    assert bnames(mount.roll) == [b"plain.jpg"]
    os.rename(bjoin(album, b"plain.jpg"), bjoin(album, name))   # ... and comes back byte-exact
    assert bnames(mount.roll) == [name] and bnames(album) == [name]
    os.rename(bjoin(mount.roll, name), bjoin(mount.roll, b"plain"))
    os.rename(bjoin(mount.roll, b"plain"), bjoin(mount.roll, name))
    assert bnames(mount.roll) == [name]

    os.mkdir(bjoin(mount.albums, name))                  # as an album name too
    assert name in bnames(mount.albums)


def test_no_normalisation_no_case_folding(mount):
    """Entries: NFC and NFD spellings, and names differing in case, are different entries."""
    nfc, nfd = "caf\u00e9.jpg".encode(), "cafe\u0301.jpg".encode()
    for n, d in [(nfc, b"nfc"), (nfd, b"nfd"), (b"IMG.JPG", b"upper"), (b"img.jpg", b"lower")]:
        write(bjoin(mount.roll, n), d)
    assert bnames(mount.roll) == sorted([nfc, nfd, b"IMG.JPG", b"img.jpg"])
    assert read(bjoin(mount.roll, nfc)) == b"nfc" and read(bjoin(mount.roll, nfd)) == b"nfd"
    assert read(mount.roll / "IMG.JPG") == b"upper" and read(mount.roll / "img.jpg") == b"lower"


def test_255_byte_names_work(mount):
    """Entries: a 255-byte name works for a roll entry, an album entry and an album."""
    n255 = b"a" * 251 + b".jpg"
    write(bjoin(mount.roll, n255), b"r")
    album = bjoin(mount.albums, b"b" * 255)
    os.mkdir(album)
    write(bjoin(album, b"c" * 255), b"c")
    assert bnames(album) == [b"c" * 255]
    assert sorted(bnames(mount.roll)) == sorted([n255, b"c" * 255])


def test_256_byte_name_is_enametoolong(mount):
    """Item 13: a 256-byte name → ENAMETOOLONG (create, album create, mkdir, rename, link)."""
    long_ascii, long_utf8 = b"a" * 252 + b".jpg", "é".encode() * 128
    album = mount.albums / "A"
    os.mkdir(album)
    write(album / "ok.jpg", b"ok")
    write(mount.roll / "solo.jpg", b"solo")
    for name in (long_ascii, long_utf8):
        assert len(name) == 256
        expect_errno(errno.ENAMETOOLONG, create, bjoin(mount.roll, name))
        expect_errno(errno.ENAMETOOLONG, create, bjoin(album, name))
        expect_errno(errno.ENAMETOOLONG, os.mkdir, bjoin(mount.albums, name))
        expect_errno(errno.ENAMETOOLONG, os.rename, album / "ok.jpg", bjoin(album, name))
        expect_errno(errno.ENAMETOOLONG, os.link, mount.roll / "solo.jpg", bjoin(album, name))
    assert names(mount.roll) == ["ok.jpg", "solo.jpg"] and names(album) == ["ok.jpg"]
    assert names(mount.albums) == ["A"]


def test_mkdir_in_roll_is_eperm(mount):
    """Ops row: mkdir in the roll → EPERM (the roll is flat)."""
    expect_errno(errno.EPERM, os.mkdir, mount.roll / "sub")
    assert run(["mkdir", mount.roll / "sub2"], check=False).returncode != 0
    assert names(mount.roll) == []


@pytest.mark.parametrize("where", ["roll", "album"])
def test_symlink_mknod_mkfifo_are_eperm(mount, where):
    """Item 13: symlink, mknod, mkfifo → EPERM: the library holds regular files and albums."""
    d = mount.roll if where == "roll" else mount.albums / "A"
    if where == "album":
        os.mkdir(d)
    write(mount.roll / "target.jpg", b"t")
    expect_errno(errno.EPERM, os.symlink, "target.jpg", d / "link")
    expect_errno(errno.EPERM, os.mkfifo, d / "fifo")
    assert run(["ln", "-s", "target.jpg", d / "link2"], check=False).returncode != 0
    if AS_ROOT:
        expect_errno(errno.EPERM, os.mknod, d / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
        expect_errno(errno.EPERM, os.mknod, d / "blk", stat.S_IFBLK | 0o600, os.makedev(7, 0))
    expect_errno(errno.EPERM, os.mknod, d / "sock", stat.S_IFSOCK | 0o600)
    assert names(mount.roll) == ["target.jpg"]
    if where == "album":
        assert names(d) == []


def test_creating_in_root_is_refused(mount):
    """Item 13 / layout: nothing can be created in the root (EPERM, or EACCES)."""
    refused = (errno.EPERM, errno.EACCES)
    expect_errno(refused, create, mount.mp / "x.jpg")
    expect_errno(refused, os.mkdir, mount.mp / "NewDir")
    expect_errno(refused, os.symlink, "Albums", mount.mp / "link")
    write(mount.roll / "x.jpg", b"x")
    expect_errno(refused, os.link, mount.roll / "x.jpg", mount.mp / "x.jpg")
    expect_errno(refused, os.rename, mount.roll / "x.jpg", mount.mp / "x.jpg")
    os.mkdir(mount.albums / "A")
    expect_errno(refused, os.rename, mount.albums / "A", mount.mp / "A")
    assert {"Albums", "Camera Roll"} <= set(names(mount.mp))
    assert not {"x.jpg", "NewDir", "link", "A"} & set(names(mount.mp))


def test_fixed_names_cannot_be_removed_or_renamed(mount):
    """Layout: the fixed directories cannot be removed or renamed (EPERM)."""
    for fixed in (mount.roll, mount.albums):
        expect_errno(errno.EPERM, os.rmdir, fixed)
        expect_errno(errno.EPERM, os.rename, fixed, mount.mp / "Other")
    expect_errno(errno.EPERM, os.rename, mount.roll, mount.albums / "Roll")
    assert run(["rmdir", mount.roll], check=False).returncode != 0
    assert run(["mv", mount.albums, mount.mp / "Elsewhere"], check=False).returncode != 0
    assert {"Albums", "Camera Roll"} <= set(names(mount.mp))
    assert "Other" not in names(mount.mp) and "Elsewhere" not in names(mount.mp)


def test_albums_holds_only_albums(mount):
    """Layout: a file created, linked or moved directly into Albums/ → EPERM."""
    write(mount.roll / "x.jpg", b"x")
    expect_errno(errno.EPERM, create, mount.albums / "f.jpg")
    expect_errno(errno.EPERM, os.link, mount.roll / "x.jpg", mount.albums / "x.jpg")
    expect_errno(errno.EPERM, os.rename, mount.roll / "x.jpg", mount.albums / "x.jpg")
    assert run(["cp", mount.roll / "x.jpg", str(mount.albums) + "/"], check=False).returncode != 0
    assert names(mount.albums) == []
    assert names(mount.roll) == ["x.jpg"]
