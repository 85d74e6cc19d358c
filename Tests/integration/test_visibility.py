"""SEMANTICS.md § Visibility: when a call returns, every path shows its effect, also names in
other directories that the call changed. Every check runs right after the call returned, with
no retry and no sleep: the kernel's caches were filled with the old names first."""

from __future__ import annotations

import errno
import os
import re

import pytest

from albumfs_testlib import expect_errno, ino, names, write

CYCLES = 250   # × 4 operations


def test_a_thousand_changes_are_visible_everywhere_at_once(mount):
    """1,000 updates, deletes, restores and creates in a row, each followed at once by a stat or
    listdir of every name it changed in another directory: zero stale answers."""
    a, b = mount.albums / "A", mount.albums / "B"
    a.mkdir()
    b.mkdir()
    deleted = mount.mp / "Recently Deleted"
    stale = []

    def check(what, condition):
        if not condition:
            stale.append(what)

    for i in range(CYCLES):
        x, y, z = f"x{i}.jpg", f"y{i}.jpg", f"z{i}.jpg"
        write(a / x, b"old")
        os.link(a / x, b / x)
        write(a / y, b"y")
        os.link(a / y, b / y)
        # Fill the kernel's caches with what is about to change.
        old = ino(b / x)
        ino(mount.roll / x), ino(a / y), ino(b / y), ino(mount.roll / y)
        names(b), names(mount.roll), names(deleted)

        # 1. An update in A: B's entry and the roll's are handed to the new asset.
        write(a / f".{x}.tmp", b"new")
        os.rename(a / f".{x}.tmp", a / x)
        new = ino(a / x)
        check(f"update {x}: B/{x}", ino(b / x) == new)
        check(f"update {x}: roll", ino(mount.roll / x) == new)
        # The first version is the original now (SEMANTICS.md § Edits keep the original).
        check(f"update {x}: Originals", ino(mount.mp / "Smart Albums" / "Originals" / x) == old)

        # 2. A delete from the roll: gone from both albums, in Recently Deleted.
        os.unlink(mount.roll / y)
        for p in (a / y, b / y):
            try:
                os.stat(p)
                stale.append(f"delete {y}: {p} still there")
            except FileNotFoundError:
                pass
        check(f"delete {y}: listing of B", y not in names(b))
        check(f"delete {y}: Recently Deleted", y in names(deleted))

        # 3. A restore: back in the roll and both albums.
        os.rename(deleted / y, mount.roll / y)
        check(f"restore {y}: A", os.path.exists(a / y))
        check(f"restore {y}: B", y in names(b))
        check(f"restore {y}: Recently Deleted", y not in names(deleted))

        # 4. A create in an album: its roll entry is there.
        write(a / z, b"z")
        check(f"create {z}: roll", ino(mount.roll / z) == ino(a / z))
        check(f"create {z}: roll listing", z in names(mount.roll))

        if len(stale) > 20:
            break
    assert not stale, f"{len(stale)} stale answers right after a call returned:\n  " + "\n  ".join(stale[:20])
    expect_errno(errno.ENOENT, os.stat, mount.roll / f".x0.jpg.tmp")


def kernel_version() -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", os.uname().release).groups()
    return int(major), int(minor)


@pytest.mark.skipif(kernel_version() < (6, 16), reason="FUSE_NOTIFY_INC_EPOCH is Linux 6.16+: on older kernels "
                    "these names go right after the reply (docs/DESIGN.md, 'Kernel caches and visibility')")
def test_names_a_rename_changes_in_its_own_directories_are_gone_when_it_returns(mount):
    """§ Visibility, the hard case: `mv Albums/A/x "Camera Roll/y"` renames the asset's roll entry
    too, in a directory the rename itself has locked (the kernel lets go of it only after the
    reply). Right after each rename returns, the old roll name is gone: 300 times, no retry."""
    a = mount.albums / "A"
    a.mkdir()
    stale = []
    for i in range(300):
        old, album_name, new = f"o{i}.jpg", f"x{i}.jpg", f"y{i}.jpg"
        write(mount.roll / old, b"x")
        os.link(mount.roll / old, a / album_name)
        ino(mount.roll / old)   # the kernel caches the old roll name
        os.rename(a / album_name, mount.roll / new)
        try:
            os.stat(mount.roll / old)
            stale.append(old)
        except FileNotFoundError:
            pass
    assert not stale, f"{len(stale)} of 300 old roll names still there right after the rename: {stale[:10]}"


def invalidation_counts(log: str) -> tuple[int, int]:
    """(requests that sent their names themselves, requests whose names went through the queue),
    from the daemon's line at unmount."""
    found = re.findall(r"name invalidations before the reply: (\d+) requests sent theirs, (\d+) through the queue", log)
    assert found, "the daemon logged no count of name invalidations at unmount"
    return int(found[-1][0]), int(found[-1][1])


@pytest.mark.parametrize("threads", ["multi", "single"])
def test_names_a_purge_or_a_delete_changes_elsewhere_are_gone_when_it_returns(mount, threads):
    """§ Visibility, as `rm` in the roll and a file manager's Empty Trash run: a delete takes the
    asset's names out of its albums, a purge (unlink in the trash's files/) its name out of
    Recently Deleted and its .trashinfo out of info/. Each of those names is cached first, and
    is gone right after the call returns (no retry). A stale Recently Deleted name would still
    answer ENOENT (its node is gone), so the check there is the next photo deleted under that
    name: it must be the one found. With the multi-threaded loop an unlink sends these names
    from its own thread (docs/DESIGN.md, "Kernel caches and visibility"), in single-threaded
    mode (-s) through the queue; the unmount log counts which."""
    if threads == "single":
        mount.unmount()
        mount.start(flags=["-s"])
    a = mount.albums / "A"
    a.mkdir()
    deleted = mount.mp / "Recently Deleted"
    info, files = (mount.mp / f".Trash-{os.getuid()}" / d for d in ("info", "files"))
    count = 150
    photos = [f"p{i}.jpg" for i in range(count)]
    for x in photos:
        write(mount.roll / x, b"p")
        os.link(mount.roll / x, a / x)
    stale = []
    for x in photos:
        ino(a / x)
        os.unlink(mount.roll / x)
        if os.path.lexists(a / x):
            stale.append(f"rm {x}: A/{x}")
    names(deleted), names(info), names(files)
    for x in photos:
        ino(deleted / x), ino(info / f"{x}.trashinfo")
        os.unlink(files / x)
        if os.path.lexists(info / f"{x}.trashinfo"):
            stale.append(f"purge {x}: info/{x}.trashinfo")
        write(mount.roll / x, b"again")
        again = ino(mount.roll / x)
        os.unlink(mount.roll / x)
        try:
            if ino(deleted / x) != again:
                stale.append(f"purge {x}: Recently Deleted/{x} is the purged photo")
        except FileNotFoundError:
            stale.append(f"purge {x}: Recently Deleted/{x} not found after another {x} was deleted")
    assert not stale, f"{len(stale)} stale names right after a call returned: {stale[:10]}"
    mount.unmount()
    sent_by_request, queued = invalidation_counts(mount.log_text())
    if threads == "multi":
        assert sent_by_request >= 2 * count, (sent_by_request, queued)
    else:
        assert sent_by_request == 0 and queued >= 2 * count, (sent_by_request, queued)
