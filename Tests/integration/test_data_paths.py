"""The two ways data reaches an asset's content file: through the daemon (every READ and
WRITE a request), and FUSE passthrough (the kernel reads and writes the content file
itself; the default where the kernel offers it, as root). Each test runs on both, and
checks what the daemon cannot see under passthrough: sizes and times of files written
behind its back, across close, fork, mmap, truncate, kill -9 and remount.
"""

from __future__ import annotations

import contextlib
import ctypes
import gzip
import mmap
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from albumfs_testlib import a_normal_user, as_user, assert_fsck_clean, proc_io, public_tmpdir, run

MODES = {"passthrough": [], "daemon": ["nopassthrough"]}


def kernel_has_passthrough() -> bool:
    """Linux 6.9+ built with CONFIG_FUSE_PASSTHROUGH, and root (backing files need CAP_SYS_ADMIN)."""
    if os.geteuid() != 0:
        return False
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    if (major, minor) < (6, 9):
        return False
    try:
        with gzip.open("/proc/config.gz", "rt") as config:
            return "CONFIG_FUSE_PASSTHROUGH=y" in config.read()
    except OSError:
        return True   # no config to read: a 6.9+ kernel, assume the default (y)


def daemon_io_bytes(m) -> int:
    """Bytes the daemon moved with read/write syscalls (its /dev/fuse traffic included)."""
    io = proc_io(m.proc.pid)
    return io["rchar"] + io["wchar"]


NO_PASSTHROUGH = pytest.mark.skipif(
    not kernel_has_passthrough(), reason="no FUSE passthrough here (Linux < 6.9, CONFIG_FUSE_PASSTHROUGH "
    "off, or not root): every mount serves data through the daemon")


@pytest.fixture(params=[pytest.param("passthrough", marks=NO_PASSTHROUGH), "daemon"])
def data_mount(request, mount_factory):
    m = mount_factory("m", options=MODES[request.param])
    m.mode_options = MODES[request.param]   # for its remounts
    return m


@NO_PASSTHROUGH
def test_passthrough_keeps_file_data_away_from_the_daemon(mount_factory):
    """With passthrough on, 16 MiB written and read back cost the daemon almost no I/O of its
    own; with nopassthrough every byte crosses it twice each way."""
    payload = os.urandom(16 << 20)
    moved = {}
    uploads = 0
    for mode, options in MODES.items():
        m = mount_factory(mode, options=options)
        # A store with a remote (ALBUMFS_TEST_REMOTE): its uploader reads the closed file from
        # the content directory twice, for its chunk digests and to send it (SEMANTICS.md
        # § Remote storage; a signed PUT names its body's SHA-256 before the body).
        uploads = 2 * len(payload) if m.remote else 0
        before = daemon_io_bytes(m)
        (m.roll / "clip.mov").write_bytes(payload)
        run(["sync"], timeout=120)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        assert (m.roll / "clip.mov").read_bytes() == payload
        moved[mode] = daemon_io_bytes(m) - before
    assert moved["daemon"] > 2 * len(payload), moved
    assert moved["passthrough"] < len(payload) // 16 + uploads, moved


def test_size_and_mtime_are_live_while_open_and_survive_remount(data_mount):
    m = data_mount
    path = m.roll / "live.jpg"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(fd, b"a" * 5000)
        first = os.stat(path)
        assert first.st_size == 5000
        os.utime(path, ns=(first.st_atime_ns, 1_000_000_000))   # an explicit, old mtime
        assert os.stat(path).st_mtime_ns == 1_000_000_000
        os.write(fd, b"b" * 3000)                                 # a later write moves it on
        second = os.stat(path)
        assert second.st_size == 8000
        assert second.st_mtime_ns > 1_000_000_000
    finally:
        os.close(fd)
    closed = os.stat(path)
    m.remount(m.mode_options)
    again = os.stat(path)
    assert (again.st_size, again.st_mtime_ns) == (closed.st_size, closed.st_mtime_ns)
    assert path.read_bytes() == b"a" * 5000 + b"b" * 3000


def close_with_the_release_lost(m, fd: int) -> None:
    """close() while the daemon is stopped, then kill it: the kernel's RELEASE (sent after
    close returns) is never served, as when an unmount or a crash comes right after a close.
    No FLUSH on either path (noflush), so close() returns at once; one that waits for the
    stopped daemon is freed by killing it after 10 s, and fails the test."""
    m.proc.send_signal(signal.SIGSTOP)
    waited = threading.Event()

    def free_the_close():
        waited.set()
        m.proc.kill()      # SIGKILL ends a stopped process too, and the request with it

    timer = threading.Timer(10, free_the_close)
    timer.start()
    try:
        try:
            os.close(fd)
        except OSError:
            if not waited.is_set():
                raise
    finally:
        timer.cancel()
        m.kill()
    assert not waited.is_set(), "close() waited for the stopped daemon: the handle asked for a FLUSH"


@pytest.mark.parametrize("steps", ["write", "write, utime", "write, utime, write", "open, no write", "truncate"])
def test_a_lost_release_changes_nothing_stat_showed(data_mount, steps):
    """SEMANTICS.md § Durability and safety: a closed file's data and metadata survive a
    kill -9. Without FLUSH the commit waits for RELEASE, which an unmount or a crash right
    after close() can drop; the next mount takes size and mtime from the data, and they
    must be exactly the ones the last stat showed (rsync compares both)."""
    m = data_mount
    path = m.roll / "lost.jpg"
    if steps == "open, no write":
        path.write_bytes(b"o" * 1000)
        os.utime(path, ns=(0, 946_684_800_000_000_000))
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        if steps != "open, no write":
            os.write(fd, b"a" * 5000)
        if "utime" in steps:
            os.utime(path, ns=(0, 1_000_000_000))
        if steps.endswith("utime, write"):
            os.write(fd, b"b" * 3000)
        if steps == "truncate":
            os.ftruncate(fd, 100)
        shown = os.stat(path)
    except BaseException:
        os.close(fd)
        raise
    close_with_the_release_lost(m, fd)
    m.start(m.mode_options)
    again = os.stat(path)
    assert (again.st_size, again.st_mtime_ns) == (shown.st_size, shown.st_mtime_ns)
    fsck_between_mounts(m)


def test_an_explicit_mtime_after_the_last_write_is_kept(data_mount):
    m = data_mount
    path = m.roll / "kept.jpg"
    path.write_bytes(b"x" * 10000)
    os.utime(path, ns=(2_000_000_000, 3_000_000_000))
    m.remount(m.mode_options)
    assert os.stat(path).st_mtime_ns == 3_000_000_000
    assert os.stat(path).st_size == 10000


def test_writes_after_a_forked_child_closed_its_copy_survive_kill(data_mount):
    """A child that inherits a descriptor and exits makes the kernel send FLUSH for the
    parent's still-open file; writes after that must still be recovered after a crash."""
    m = data_mount
    path = m.roll / "forked.jpg"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(fd, b"1" * 100_000)
        subprocess.run(["true"], pass_fds=(fd,), check=True, timeout=30)   # FLUSH
        flushed = os.stat(path).st_mtime_ns
        time.sleep(0.05)
        os.write(fd, b"2" * 900_000)
        m.kill()
    finally:
        with contextlib.suppress(OSError):   # ENOTCONN once the daemon is dead
            os.close(fd)
    m.start(m.mode_options)
    assert os.stat(path).st_size == 1_000_000
    assert os.stat(path).st_mtime_ns > flushed, "the last write's mtime was lost"
    assert path.read_bytes() == b"1" * 100_000 + b"2" * 900_000
    fsck_between_mounts(m)


def test_mmap_writes_reach_the_asset(data_mount):
    m = data_mount
    path = m.roll / "mapped.raw"
    with open(path, "w+b") as f:
        f.truncate(1 << 20)
        with mmap.mmap(f.fileno(), 1 << 20) as mapped:
            mapped[4096:4096 + 11] = b"hello world"
            mapped.flush()
    assert os.stat(path).st_size == 1 << 20
    m.remount(m.mode_options)
    data = path.read_bytes()
    assert len(data) == 1 << 20 and data[4096:4107] == b"hello world" and data.count(0) == (1 << 20) - 11


def test_the_same_operations_give_the_same_bytes_as_a_plain_file(data_mount, tmp_path):
    """append, truncate by path while open, a write past the end, O_TRUNC reopen, pwrite,
    copy_file_range: albumfs and a plain file must end with the same bytes and size."""
    m = data_mount
    plain = tmp_path / "plain.bin"

    def script(path: Path, source_path: Path):
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
        os.write(fd, b"A" * 70_000)
        os.write(fd, b"B" * 10)
        os.truncate(path, 1234)                     # by path, while the handle is open
        os.write(fd, b"C" * 100)                    # O_APPEND: at the new end
        os.close(fd)
        fd = os.open(path, os.O_RDWR)
        os.pwrite(fd, b"D" * 50, 200_000)           # a hole, then data
        os.ftruncate(fd, 150_000)
        os.close(fd)
        source = os.open(source_path, os.O_RDONLY)
        fd = os.open(path, os.O_WRONLY)
        os.copy_file_range(source, fd, 30_000, 0, 5_000)
        os.close(fd)
        os.close(source)
        with open(path, "r+b") as f:
            f.seek(0, os.SEEK_END)
            f.write(b"E" * 333)
        return os.stat(path).st_size

    source = os.urandom(40_000)
    (tmp_path / "source.bin").write_bytes(source)
    (m.roll / "source.bin").write_bytes(source)   # copy_file_range stays within one file system
    expected_size = script(plain, tmp_path / "source.bin")
    assert script(m.roll / "same.bin", m.roll / "source.bin") == expected_size
    m.remount(m.mode_options)
    assert os.stat(m.roll / "same.bin").st_size == expected_size
    assert (m.roll / "same.bin").read_bytes() == plain.read_bytes()
    fd = os.open(m.roll / "same.bin", os.O_WRONLY | os.O_TRUNC)
    os.close(fd)
    assert os.stat(m.roll / "same.bin").st_size == 0
    fsck_between_mounts(m)


def fsck_between_mounts(m):
    m.unmount()
    assert_fsck_clean(m.store, "between mounts")
    m.start(m.mode_options)


_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
FALLOC_FL_KEEP_SIZE = 0x01


def fallocate(fd: int, mode: int, offset: int, length: int) -> None:
    """fallocate(2) itself (glibc's posix_fallocate writes zeros where the filesystem says EOPNOTSUPP)."""
    if _libc.fallocate(fd, mode, offset, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def content_file_of(m, path) -> str:
    asset = os.stat(path).st_ino
    store = Path(m.store) / "content"
    return os.fspath(store / f"{asset & 0xff:02x}" / f"{asset:016x}")


def test_fallocate_allocates_and_grows_like_ext4(data_mount):
    """SEMANTICS.md § Attributes: fallocate mode 0 allocates and grows the file;
    FALLOC_FL_KEEP_SIZE (fallocate -n) allocates and keeps the size; both on either data path,
    stored across a remount."""
    m = data_mount
    grown, kept = m.roll / "grown.bin", m.roll / "kept.bin"
    fd = os.open(grown, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(fd, b"head")
        fallocate(fd, 0, 0, 1 << 20)
        assert os.fstat(fd).st_size == 1 << 20
    finally:
        os.close(fd)
    (kept).write_bytes(b"five!")
    run(["fallocate", "-n", "-l", str(2 << 20), kept])
    assert os.stat(grown).st_size == 1 << 20 and os.stat(kept).st_size == 5
    assert os.stat(content_file_of(m, kept)).st_blocks * 512 >= 2 << 20, "KEEP_SIZE allocated nothing"
    m.remount(m.mode_options)
    assert os.stat(grown).st_size == 1 << 20 and os.stat(kept).st_size == 5
    assert grown.read_bytes() == b"head" + bytes((1 << 20) - 4)
    assert kept.read_bytes() == b"five!"
    fsck_between_mounts(m)


def test_fallocate_before_a_crash_is_recovered(data_mount):
    """SEMANTICS.md § Durability and safety: fallocate marks the asset as being written before the
    data changes, so a kill -9 before the close leaves a store the next mount makes whole."""
    m = data_mount
    path = m.roll / "prealloc.bin"
    path.write_bytes(b"x")
    fd = os.open(path, os.O_WRONLY)
    try:
        fallocate(fd, 0, 0, 3 << 20)
        m.kill()
    finally:
        with contextlib.suppress(OSError):   # ENOTCONN once the daemon is dead
            os.close(fd)
    m.start(m.mode_options)
    assert os.stat(path).st_size == 3 << 20
    fsck_between_mounts(m)


@contextlib.contextmanager
def overlay_directory(base: Path):
    """An overlayfs mount at base/merged (root); always unmounted."""
    for d in ("lower", "upper", "work", "merged"):
        (base / d).mkdir(parents=True)
    run(["mount", "-t", "overlay", "overlay", "-o",
         f"lowerdir={base / 'lower'},upperdir={base / 'upper'},workdir={base / 'work'}", base / "merged"])
    try:
        yield base / "merged"
    finally:
        if run(["umount", base / "merged"], check=False, timeout=30).returncode != 0:
            run(["umount", "-l", base / "merged"], check=False, timeout=30)


def test_a_users_mount_takes_the_daemon_path_with_its_own_block_size(mount_factory):
    """A normal user's own mount (passthrough needs CAP_SYS_ADMIN: the kernel refuses its backing
    files, EPERM). One log line says which path and why; the first stat already reports the
    daemon path's 1 MiB block size, so cp writes 1 MiB per request, not 4 KiB."""
    if os.geteuid() != 0:
        pytest.skip("a mount as another user needs root to set it up")
    uid = a_normal_user()
    with public_tmpdir() as pub:
        m = mount_factory("m", base=pub / "m", uid=uid)
        try:
            roll = m.roll
            first = as_user(["stat", "-c", "%o", roll], uid=uid, gid=uid).stdout.split()
            assert first == [str(1 << 20)], f"the first stat reported a block size of {first}"
            source = pub / "clip.src"
            source.write_bytes(os.urandom(16 << 20))
            os.chmod(source, 0o644)
            requests = proc_io(m.proc.pid)["syscr"]
            as_user(["cp", source, roll / "clip.mov"], uid=uid, gid=uid)
            requests = proc_io(m.proc.pid)["syscr"] - requests
            assert requests < 100, f"cp of 16 MiB cost the daemon {requests} reads of /dev/fuse"
            as_user(["cmp", source, roll / "clip.mov"], uid=uid, gid=uid)
            log = m.log_text()
            assert log.count("FUSE passthrough needs CAP_SYS_ADMIN") == 1, log
            assert log.count("file data") == 1, log
        finally:
            m.unmount()


def test_through_the_daemon_a_file_reports_the_block_size_of_its_use(mount_factory):
    """On the daemon path (DESIGN.md § Data path) an empty file reports a block size of 1 MiB, so
    that cp, which sizes its buffer by its destination's st_blksize right after creating it,
    writes in 1 MiB requests; a file with data reports 4 KiB, as on the disk below, so that cat
    reads it with its usual 128 KiB buffer, not a fresh 1 MiB one per file."""
    m = mount_factory("m", options=["nopassthrough"])
    path = m.roll / "a.jpg"
    with open(path, "wb") as f:
        assert os.fstat(f.fileno()).st_blksize == 1 << 20
        f.write(os.urandom(100_000))
    assert os.stat(path).st_blksize == 4096
    assert os.stat(m.albums).st_blksize == 1 << 20


def test_the_data_path_is_logged_once_per_mount(mount_factory):
    m = mount_factory("m", options=["nopassthrough"])
    (m.roll / "a.jpg").write_bytes(b"a")
    assert (m.roll / "a.jpg").read_bytes() == b"a"
    assert os.stat(m.roll).st_blksize == 1 << 20
    log = m.log_text()
    assert log.count("file data goes through the daemon (-o nopassthrough)") == 1, log
    assert log.count("file data") == 1, log


@NO_PASSTHROUGH
def test_a_store_passthrough_cannot_stack_on_falls_back_for_the_whole_mount(mount_factory, tmp_path):
    """A store inside an overlay mount: the kernel refuses its backing files (ELOOP). The mount
    falls back to the daemon path once, says so in its log, and reports the daemon path's block
    size from the first stat on, before and after files are opened."""
    with overlay_directory(tmp_path / "overlay") as merged:
        m = mount_factory("m", store=merged / "store")
        try:
            path = m.roll / "x.jpg"
            assert os.stat(m.roll).st_blksize == 1 << 20, "the first stat reported the passthrough block size"
            path.write_bytes(b"through the daemon")
            assert path.read_bytes() == b"through the daemon"
            (m.roll / "empty.jpg").touch()
            assert os.stat(m.roll / "empty.jpg").st_blksize == 1 << 20
            assert "passthrough is off" in m.log_text() and "Too many levels" in m.log_text(), m.log_text()
            assert m.log_text().count("passthrough is off") == 1, m.log_text()
        finally:
            m.expect_mounted = False
            m.cleanup()
