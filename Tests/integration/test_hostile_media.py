"""SEMANTICS.md § What albumfs knows of each asset (issue 12 item 7) on a real mount: hostile or
broken media (cut short, box sizes past the end, zero or looping, an empty file, a 4 GiB sparse
file) never crash or hang the daemon and never block the mount: each is still an asset, hashed,
with fewer attributes. (The readers' own fuzz-style tests are in Tests/AlbumMediaTests.)"""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import time
from pathlib import Path

import pytest

from albumfs_testlib import ALBUMFS, INDEX_TIMEOUT, daemon_children, index_wait, sha256
from test_views import MAKE_MEDIA, fact, media  # noqa: F401  (the media fixture)

# The 4 GiB sparse file is 4 GiB of zeros to hash, by a reader at idle priority (on a loaded
# machine it may run out of the reader's time, 10 s + 1 s per 32 MiB, and be hashed again by the
# daemon): room for that on top of the usual bound.
HASH_4_GIB = INDEX_TIMEOUT + 200


def hostile_files(media_dir: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for name in ("live.jpg", "live.mov", "live2.heic", "clip.mp4", "raw.dng"):
        data = (media_dir / name).read_bytes()
        stem, ext = name.rsplit(".", 1)
        files[f"{stem}-half.{ext}"] = data[: len(data) // 2]
        files[f"{stem}-head.{ext}"] = data[:40]
    mov = bytearray((media_dir / "live.mov").read_bytes())
    past_end = bytearray(mov)
    struct.pack_into(">I", past_end, 0, 0x7FFFFFF0)             # first box claims 2 GiB
    files["past-end.mov"] = bytes(past_end)
    huge64 = bytearray(mov)
    struct.pack_into(">I", huge64, 0, 1)                        # 64-bit size follows…
    files["huge64.mov"] = bytes(huge64[:8] + struct.pack(">Q", 2**63 - 1) + huge64[8:])
    zero = bytearray(mov)
    struct.pack_into(">I", zero, 0, 0)                          # size 0: "to the end"
    files["zero-size.mov"] = bytes(zero)
    # A moov that holds itself over and over: boxes nested as deep as the bytes allow.
    nested = b""
    for _ in range(2000):
        nested = struct.pack(">I", len(nested) + 8) + b"moov" + nested
    files["deep.mov"] = struct.pack(">I", 20) + b"ftypqt  \x00\x00\x00\x00qt  " + nested
    files["empty.jpg"] = b""
    files["random.heic"] = os.urandom(4096)
    return files


@pytest.mark.mount_timeout(HASH_4_GIB + 120)
def test_hostile_media_never_crash_or_block_the_mount(mount, media):
    media_dir, _ = media
    files = hostile_files(media_dir)
    for name, data in files.items():
        with open(mount.roll / name, "wb") as f:
            f.write(data)
    sparse = mount.roll / "sparse.mov"
    with open(sparse, "wb") as f:
        f.truncate(4 * 2**30)
    # `albumfs index --wait` returns once every file is read; the mount answers all along (listing,
    # stat and reads never wait for the readers), checked while it waits.
    waiting = subprocess.Popen([ALBUMFS, "index", "--wait", "--timeout", str(HASH_4_GIB), mount.mp],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        while True:
            assert len(os.listdir(mount.roll)) == len(files) + 1
            try:
                waiting.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
    finally:
        if waiting.poll() is None:
            waiting.kill()
        output = waiting.communicate(timeout=30)[0]
    assert waiting.returncode == 0, f"index --wait: exit {waiting.returncode}: {output!r}"
    for name, data in files.items():
        assert fact(mount.roll / name, "sha256") == sha256(data), name
    zeros, block = hashlib.sha256(), bytes(2**20)
    for _ in range(4096):
        zeros.update(block)
    assert fact(sparse, "sha256") == zeros.hexdigest()
    assert fact(mount.roll / "empty.jpg", "kind") == "other"
    assert fact(mount.roll / "live-head.jpg", "captured") is None
    assert fact(mount.roll / "past-end.mov", "width") is None or int(fact(mount.roll / "past-end.mov", "width")) > 0
    with open(mount.roll / "live-half.jpg", "rb") as f:
        assert f.read() == files["live-half.jpg"]


def reader_workers(daemon_pid: int) -> list[int]:
    """The daemon's facts workers (`albumfs read-facts`, its children)."""
    return [pid for pid, _ in daemon_children(daemon_pid, b"read-facts")]


def test_the_facts_worker_runs_at_idle_cpu_and_io_priority(mount):
    """Background work is invisible: the facts worker is SCHED_IDLE and in the idle I/O class."""
    [daemon] = [int(p) for p in os.listdir("/proc") if p.isdigit() and _is_daemon_of(int(p), mount)]
    (mount.roll / "x.jpg").write_bytes(b"x" * 1000)
    index_wait(mount.mp)   # the worker starts with the first file to read
    [worker] = reader_workers(daemon)
    assert os.sched_getscheduler(worker) == os.SCHED_IDLE
    shown = subprocess.run(["ionice", "-p", str(worker)], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "idle", shown


def test_a_reader_that_dies_costs_a_worker_not_the_mount(mount, media):
    """The media readers run in a worker process: killed in the middle of a file (as a C library
    that aborts on a hostile file would be), the file still gets its SHA-256 (hashed by the
    daemon), the mount never notices, and the next file gets every fact from a new worker."""
    media_dir, expected = media
    [daemon] = [int(p) for p in os.listdir("/proc") if p.isdigit() and _is_daemon_of(int(p), mount)]
    sparse = mount.roll / "big.mov"
    # 1 MiB of zeros, read at once: that starts the worker. Then, with no handle open (so that no
    # close queues the file a second time, for a read the worker would finish), 2 GiB to hash:
    # the worker is busy long enough to be killed once it has the file open.
    sparse.write_bytes(bytes(2**20))
    index_wait(mount.mp)
    [worker] = reader_workers(daemon)
    content = f"{os.stat(sparse).st_ino:016x}"
    os.truncate(sparse, 2 * 2**30)
    deadline = time.monotonic() + 30
    while not has_open(worker, content):
        assert time.monotonic() < deadline, "the facts worker never opened the file"
        time.sleep(0.005)
    os.kill(worker, 9)
    index_wait(mount.mp, timeout=HASH_4_GIB)
    assert len(os.listdir(mount.roll)) == 1
    zeros, block = hashlib.sha256(), bytes(2**20)
    for _ in range(2048):
        zeros.update(block)
    assert fact(sparse, "sha256") == zeros.hexdigest()
    assert fact(sparse, "type") is None, "a file whose reader died keeps only its SHA-256"
    (mount.roll / "live.jpg").write_bytes((media_dir / "live.jpg").read_bytes())
    index_wait(mount.mp)
    assert fact(mount.roll / "live.jpg", "captured") == expected["live.jpg"]["captured"]


def has_open(pid: int, name: str) -> bool:
    """Whether process pid has a file whose path ends with name open."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").endswith("/" + name):
                return True
        except OSError:
            continue
    return False


def _is_daemon_of(pid: int, mount) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return False
    return b"mount" in args and os.fsencode(str(mount.store)) in args
