"""FUSE over io_uring (`-o uring`: DeviceChannel, FuseRing). Where the kernel offers it
(Linux 6.14+ with the fuse module's enable_uring on, a switch only root can turn), requests
come through per-CPU io_uring queues instead of read() and writev() on /dev/fuse; where it
does not, the mount says so and takes /dev/fuse. SEMANTICS.md holds either way: these tests
check that the calls give the same results through the ring, that they did come through it,
and the fallback. scripts/test runs the visibility, crash and concurrency tests once more
with the ring on."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from pathlib import Path

import pytest

from albumfs_testlib import a_normal_user, as_user, public_tmpdir

ENABLE = Path("/sys/module/fuse/parameters/enable_uring")
CAN_SWITCH = ENABLE.exists() and os.geteuid() == 0


@contextlib.contextmanager
def uring_offered(offered: bool):
    """The kernel's switch, set for the block and put back after it."""
    before = ENABLE.read_text().strip()
    ENABLE.write_text("Y" if offered else "N")
    try:
        yield
    finally:
        ENABLE.write_text(before)


def exercise(m) -> int:
    """Calls of every kind a photo library sees, each checked. Returns how many requests they
    certainly made: every open is an OPEN or CREATE and its close a RELEASE (whatever the kernel
    caches), and every mkdir, rename and unlink one request; stats and lookups may be cached."""
    album = m.albums / "Trip"
    album.mkdir()
    opens = 0
    photos = {}
    for i in range(60):
        data = os.urandom(4096 + 997 * i)
        (album / f"p{i:02}.jpg").write_bytes(data)
        photos[f"p{i:02}.jpg"] = data
    opens += 60
    # Larger than one request's payload (1 MiB): WRITEs and READs that fill the ring's buffer.
    big = os.urandom((3 << 20) + 12345)
    (m.roll / "clip.mov").write_bytes(big)
    assert hashlib.sha256((m.roll / "clip.mov").read_bytes()).digest() == hashlib.sha256(big).digest()
    opens += 2
    assert sorted(os.listdir(album)) == sorted(photos)
    for name, data in photos.items():
        assert (album / name).read_bytes() == data
        assert os.stat(album / name).st_size == len(data)
        assert (m.roll / name).read_bytes() == data   # the roll shows every asset (SEMANTICS § Model)
    opens += 2 * len(photos)
    for i in range(0, 60, 3):
        os.rename(album / f"p{i:02}.jpg", album / f"r{i:02}.jpg")
        os.unlink(album / f"p{i + 1:02}.jpg")
    names = sorted(os.listdir(album))
    assert len(names) == 40 and "r00.jpg" in names and "p01.jpg" not in names
    assert (album / "r03.jpg").read_bytes() == photos["p03.jpg"]
    # Unlinking in an album drops the reference only (SEMANTICS § Model).
    assert (m.roll / "p01.jpg").read_bytes() == photos["p01.jpg"]
    opens += 2
    return 2 * opens + 1 + 20 + 20


@pytest.mark.skipif(not CAN_SWITCH, reason="needs root and a kernel with FUSE over io_uring (Linux 6.14+)")
def test_requests_come_through_the_ring_where_the_kernel_offers_it(mount_factory):
    with uring_offered(True):
        m = mount_factory("m", options=["uring", "nopassthrough"])
        requests = exercise(m)
        m.unmount()
    log = m.log_text()
    assert "requests: FUSE over io_uring" in log, log
    served = re.search(r"requests served through io_uring: (\d+)", log)
    assert served, log
    assert int(served.group(1)) >= requests, log
    assert "ended an entry early" not in log, log


@pytest.mark.skipif(not CAN_SWITCH, reason="needs root and a kernel with FUSE over io_uring (Linux 6.14+)")
def test_a_normal_users_mount_takes_the_ring_too(mount_factory):
    """The ring needs no privilege: the kernel's switch is root's, a mount's use of it is not."""
    uid = a_normal_user()
    with uring_offered(True), public_tmpdir() as pub:
        m = mount_factory("m", base=pub / "m", uid=uid, options=["uring"])
        try:
            source = pub / "a.src"
            source.write_bytes(os.urandom((2 << 20) + 4321))
            os.chmod(source, 0o644)
            copied = as_user(["cp", source, m.roll / "a.jpg"], uid=uid, gid=uid)
            assert copied.returncode == 0, copied.stderr
            compared = as_user(["cmp", source, m.roll / "a.jpg"], uid=uid, gid=uid)
            assert compared.returncode == 0, compared.stdout + compared.stderr
        finally:
            # Unmounted before the public dir goes (it is left behind with a mount in it).
            m.unmount()
        log = m.log_text()   # before the public dir, and the log in it, go
    assert "requests: FUSE over io_uring" in log, log
    served = re.search(r"requests served through io_uring: (\d+)", log)
    assert served and int(served.group(1)) >= 5, log


@pytest.mark.skipif(ENABLE.exists() and not CAN_SWITCH and ENABLE.read_text().strip() == "Y",
                    reason="the kernel offers the ring and only root can switch that off")
def test_where_the_kernel_offers_no_ring_requests_stay_on_dev_fuse(mount_factory):
    with uring_offered(False) if CAN_SWITCH else contextlib.nullcontext():
        m = mount_factory("m", options=["uring"])
        exercise(m)
        m.unmount()
    log = m.log_text()
    assert "requests: /dev/fuse (-o uring: this kernel offers no FUSE over io_uring" in log, log
    assert "served through io_uring" not in log, log


@pytest.mark.skipif(not CAN_SWITCH, reason="needs root and a kernel with FUSE over io_uring (Linux 6.14+)")
def test_without_the_option_the_ring_is_not_used(mount_factory):
    with uring_offered(True):
        m = mount_factory("m")
        (m.roll / "a.jpg").write_bytes(b"a")
        assert (m.roll / "a.jpg").read_bytes() == b"a"
        m.unmount()
    assert "io_uring" not in m.log_text(), m.log_text()
