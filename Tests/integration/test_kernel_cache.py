"""What a listing leaves in the kernel (docs/DESIGN.md, "Kernel caches and visibility"): every
listing is a READDIRPLUS, so a name listed once is known with its attributes, and what a
program does next by name (`ls -l` after `ls`, `rm` of what a glob listed, a file manager's
Empty Trash) costs no LOOKUP per name. Counted from the daemon's own request log (-d)."""

from __future__ import annotations

import os
import re

from albumfs_testlib import names, write

COUNT = 300   # many listing pages: the kernel asks for about 25 entries per READDIRPLUS


def requests(mount, opcode: str, directory, start: int = 0, end: int | None = None) -> int:
    """`opcode` requests on `directory` (a LOOKUP: of a name in it) logged in bytes
    [start, end) of the daemon's log."""
    node = os.stat(directory).st_ino
    text = mount.log.read_bytes()[start:end].decode(errors="replace")
    return len(re.findall(rf"opcode: {opcode} \(\d+\), nodeid: {node},", text))


def restart_logging_requests(mount):
    """A fresh kernel cache (nothing from the creates) and a daemon that logs every request."""
    mount.unmount()
    mount.start(flags=["-d"])


def test_stat_after_a_names_only_listing_asks_nothing(mount_factory):
    m = mount_factory("m")
    for i in range(COUNT):
        write(m.roll / f"IMG_{i:04}.JPG", b"x")
    restart_logging_requests(m)
    listed = names(m.roll)   # as `ls` without -l: names only
    assert len(listed) == COUNT
    since = m.log.stat().st_size
    # The log names requests as this test reads them: the listing was READDIRPLUS.
    assert requests(m, "READDIRPLUS", m.roll, end=since) > 0
    for name in listed:
        os.lstat(m.roll / name)
    assert requests(m, "LOOKUP", m.roll, since) == 0


def test_empty_trash_sends_no_lookup_per_item(mount_factory):
    """SEMANTICS.md § Recently Deleted, and the file manager's trash: Empty Trash unlinks each
    listed name in files/."""
    m = mount_factory("m")
    for i in range(COUNT):
        write(m.roll / f"IMG_{i:04}.JPG", b"x")
        os.unlink(m.roll / f"IMG_{i:04}.JPG")
    restart_logging_requests(m)
    files = m.mp / f".Trash-{os.getuid()}" / "files"
    listed = names(files)
    assert len(listed) == COUNT
    since = m.log.stat().st_size
    for name in listed:
        os.unlink(files / name)
    assert names(files) == [] and names(m.mp / "Recently Deleted") == []
    assert requests(m, "UNLINK", files, since) == COUNT
    assert requests(m, "LOOKUP", files, since) == 0
