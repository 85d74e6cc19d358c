"""README "Back up and restore": `rsync -aH --delete --exclude='/Recently Deleted/' --exclude='/By Date/'
--exclude='/Smart Albums/' MOUNT/ BACKUP/` backs a library up; the same excludes restore it into a
new one, equal in every way a user sees (album entries are hard links of the roll entry:
SEMANTICS.md § Assets and entries)."""

from __future__ import annotations

import os
import re

from albumfs_testlib import payload, run, sha256, write

# Exactly the README's excludes: what was deleted, and the computed views.
EXCLUDE = ["--exclude=/Recently Deleted/", "--exclude=/By Date/", "--exclude=/Smart Albums/"]
SKIPPED = {"Recently Deleted", "By Date", "Smart Albums"}


def library_view(mp) -> tuple[dict, list]:
    """path -> (mode, mtime_ns, size, sha256) of every file outside Recently Deleted, and the
    groups of paths that are one inode (sorted)."""
    files, groups = {}, {}
    for dirpath, dirs, names in os.walk(mp):
        if dirpath == os.fspath(mp):
            dirs[:] = [d for d in dirs if d not in SKIPPED]
        for name in names:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, mp)
            digest = sha256(path)
            files[rel] = (st.st_mode, st.st_mtime_ns, st.st_size, digest)
            groups.setdefault(st.st_ino, []).append(rel)
    return files, sorted(sorted(g) for g in groups.values())


def transferred(output: str) -> int:
    return int(re.search(r"Number of regular files transferred: ([\d,]+)", output).group(1).replace(",", ""))


def test_backup_and_restore_with_rsync_hard_links(mount_factory, tmp_path):
    """A library with photos in several albums and sub-albums, one deleted: backed up, restored
    into a fresh store, compares equal (roll, album memberships as inode groups, contents, modes,
    mtimes); a second backup transfers 0 files."""
    m = mount_factory("one")
    trip, day, best = m.albums / "Trip", m.albums / "Trip" / "Day 1", m.albums / "Best"
    for d in (trip, day, best):
        d.mkdir(parents=True)
    for i in range(8):
        write(trip / f"p{i}.jpg", payload(20_000 + i, f"p{i}"))
        os.chmod(trip / f"p{i}.jpg", 0o640 if i % 2 else 0o644)
        os.utime(trip / f"p{i}.jpg", ns=(1_600_000_000_000_000_000 + i, 1_600_000_000_000_000_000 + i))
    os.link(trip / "p1.jpg", best / "p1.jpg")
    os.link(trip / "p2.jpg", day / "second name.jpg")
    os.link(trip / "p3.jpg", best / "favourite.jpg")
    write(m.roll / "roll only.jpg", b"only in the roll")
    os.unlink(m.roll / "p7.jpg")   # in Recently Deleted: not part of the backup
    backup = tmp_path / "backup"
    run(["rsync", "-aH", "--delete", *EXCLUDE, f"{m.mp}/", f"{backup}/"])
    again = run(["rsync", "-aH", "--delete", *EXCLUDE, "--stats", f"{m.mp}/", f"{backup}/"], text=True).stdout
    assert transferred(again) == 0, "a second backup must transfer nothing"

    restored = mount_factory("two")
    run(["rsync", "-aH", *EXCLUDE, f"{backup}/", f"{restored.mp}/"])
    original_files, original_groups = library_view(m.mp)
    restored_files, restored_groups = library_view(restored.mp)
    assert restored_files == original_files
    assert restored_groups == original_groups
    assert len(os.listdir(restored.roll)) == len(os.listdir(m.roll)) == 8
    assert os.listdir(restored.mp / "Recently Deleted") == []
    check = run(["rsync", "-aH", "-n", "-i", *EXCLUDE, f"{backup}/", f"{restored.mp}/"], text=True).stdout
    assert check.strip() == "", f"the restored library differs from the backup:\n{check}"
