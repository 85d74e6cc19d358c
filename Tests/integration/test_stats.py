"""`albumfs stats`: what a library holds, whether it is mounted and where (docs/GUIDE.md,
"Commands")."""

from __future__ import annotations

import json
import os

from albumfs_testlib import albumfs, index_wait, payload, write


def test_stats_of_a_mounted_and_an_unmounted_library(mount):
    """--json by mount point and by --store: assets and bytes of the roll, albums, Recently
    Deleted apart, side files apart, mounted and where; after the unmount: not mounted."""
    (mount.albums / "A").mkdir()
    (mount.albums / "A" / "B").mkdir()
    write(mount.albums / "A" / "one.jpg", payload(5000, "one"))
    write(mount.roll / "two.jpg", payload(3000, "two"))
    write(mount.roll / "gone.jpg", payload(7000, "gone"))
    write(mount.albums / "A" / ".DS_Store", b"ds")
    os.unlink(mount.roll / "gone.jpg")
    index_wait(mount.mp)
    by_mount = json.loads(albumfs("stats", "--json", mount.mp, text=True).stdout)
    by_store = json.loads(albumfs("stats", "--json", "--store", mount.store, text=True).stdout)
    assert by_mount == by_store
    assert by_mount["store"] == os.path.realpath(mount.store)
    assert by_mount["mounted"] is True and by_mount["mount_points"] == [os.path.realpath(mount.mp)]
    assert (by_mount["assets"], by_mount["bytes"], by_mount["albums"]) == (2, 8000, 2)
    assert by_mount["recently_deleted"] == {"assets": 1, "bytes": 7000}
    assert by_mount["side_files"] == 1
    assert by_mount["kinds"] == {"photo": 0, "video": 0, "audio": 0, "other": 2, "unread": 0}, \
        "the payloads are not photos: kind other (the deleted one is not counted)"
    assert by_mount["favorites"] == 0
    text = albumfs("stats", mount.mp, text=True).stdout
    assert "assets: 2 (8000 bytes): 0 photos, 0 videos, 0 audio, 2 other" in text and "Recently Deleted: 1 (7000 bytes)" in text
    mount.unmount()
    after = json.loads(albumfs("stats", "--json", "--store", mount.store, text=True).stdout)
    assert after["mounted"] is False and after["mount_points"] == []
    assert after["assets"] == 2
    p = albumfs("stats", mount.mp, check=False, text=True)
    assert p.returncode == 2 and "not an albumfs mount point" in p.stderr
