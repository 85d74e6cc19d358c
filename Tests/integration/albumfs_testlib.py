"""Helpers shared by the albumfs integration tests (the fixtures live in conftest.py)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import os
import pwd
import random
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

# The mount table, the daemon's processes and the mount supervisor are shared with the bench.
sys.path.insert(0, str(REPO_ROOT / "scripts" / "lib"))
from albumfs_mount import (  # noqa: E402,F401  (re-exported for the tests)
    abort_fuse_connection, ensure_fusectl, fuse_connection_abort_file, is_mounted, mount_entries,
    mount_entry, pids_mentioning, proc_status_kib, stop_background_mount, thread_stacks,
)

# Every subprocess a test starts gets this timeout unless it asks for another.
TIMEOUT = 120
# How long `albumfs index --wait` may take to see every closed file's facts read. The contract
# says "within a few seconds" of each close, with no bound on a queue of many files on a loaded
# 2-core machine: this only stops a daemon that never gets there from hanging the test.
INDEX_TIMEOUT = 120
# How long a command that must be refused may run before it counts as hung (it checks the store,
# its lock and its database first: no bound in the contract, so a loaded machine gets room).
REFUSAL_WAIT = 30.0

MiB = 1024 * 1024
GiB = 1024 * MiB

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
AT_FDCWD = -100


def albumfs_bin() -> Path:
    """$ALBUMFS_BIN, else the release build, else (only if there is no release build) the debug build."""
    env = os.environ.get("ALBUMFS_BIN")
    if env:
        return Path(env)
    release = REPO_ROOT / ".build" / "release" / "albumfs"
    debug = REPO_ROOT / ".build" / "debug" / "albumfs"
    if not release.exists() and debug.exists():
        return debug
    return release


ALBUMFS = albumfs_bin()


# --- running commands -------------------------------------------------------


class CommandFailed(subprocess.CalledProcessError):
    """CalledProcessError whose message includes the command's output."""

    def __str__(self) -> str:
        return (
            f"{self.cmd!r} exited with {self.returncode}\n"
            f"--- stdout ---\n{_show(self.stdout)}\n--- stderr ---\n{_show(self.stderr)}"
        )


def _show(data) -> str:
    if data is None:
        return "(not captured)"
    if isinstance(data, bytes):
        data = data.decode("utf-8", "backslashreplace")
    return data[-4000:]


def _arg(a):
    return os.fspath(a) if isinstance(a, os.PathLike) else a


def run(cmd, *, timeout: float = TIMEOUT, check: bool = True, **kw) -> subprocess.CompletedProcess:
    """subprocess.run with a timeout, output captured, and check=True by default."""
    cmd = [_arg(c) for c in cmd]
    if "stdout" not in kw and "capture_output" not in kw:
        kw["stdout"] = subprocess.PIPE
    if "stderr" not in kw and "capture_output" not in kw:
        kw["stderr"] = subprocess.PIPE
    kw.setdefault("stdin", subprocess.DEVNULL)
    p = subprocess.run(cmd, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise CommandFailed(p.returncode, cmd, p.stdout, p.stderr)
    return p


def albumfs(*args, **kw) -> subprocess.CompletedProcess:
    """Run the albumfs binary (not for foreground mounts)."""
    return run([ALBUMFS, *args], **kw)


def poll(predicate, timeout: float, interval: float = 0.1) -> bool:
    """Whether `predicate` holds within `timeout` seconds. For what the contract makes eventual
    only, background work (uploads draining, evictions once uploaded, a download's install, a
    failure being recorded): never for a name, size or listing right after a call returned."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return predicate()
        time.sleep(interval)
    return True


def index_wait(mp, timeout: float = INDEX_TIMEOUT) -> None:
    """`albumfs index --wait --timeout T MP`: returns once the daemon has read the facts of every
    file closed before it (SEMANTICS.md § What albumfs knows of each asset: the event that the
    tests wait for instead of time); fails the test after `timeout` seconds."""
    run([ALBUMFS, "index", "--wait", "--timeout", str(int(timeout)), mp], timeout=timeout + 30)


def fsck(store, *args, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """`albumfs fsck --store STORE [args]`, exit status not checked (text output)."""
    return run([ALBUMFS, "fsck", "--store", store, *args], check=False, timeout=timeout, text=True,
               errors="backslashreplace")


def assert_fsck_clean(store, context: str = "") -> None:
    p = fsck(store)
    assert p.returncode == 0, (f"albumfs fsck {context}: exit {p.returncode}, want 0\n"
                               f"--- stdout ---\n{p.stdout[-4000:]}\n--- stderr ---\n{p.stderr[-2000:]}")


def attempt(cmd, tmp_path, mps, *, wait: float = REFUSAL_WAIT):
    """Run an albumfs command that should fail fast; never leave a mount or a process behind.

    Returns (exit status or None if it was still running after `wait`, stderr+stdout bytes,
    whether any of the mount points mps got mounted)."""
    err_path = Path(tmp_path) / f"attempt-{time.monotonic_ns()}.err"
    # Files, not pipes: a daemon that wrongly detaches would keep a pipe open forever.
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([os.fspath(c) for c in cmd], stdin=subprocess.DEVNULL,
                                stdout=err, stderr=err)
        try:
            rc = proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            mounted = any(is_mounted(m) for m in mps)
            for m in mps:
                if is_mounted(m):
                    run(["fusermount3", "-u", m], check=False, timeout=30)
                if is_mounted(m):
                    run(["fusermount3", "-uz", m], check=False, timeout=30)
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    return rc, err_path.read_bytes(), mounted


# --- files and directories --------------------------------------------------


def payload(size: int, seed) -> bytes:
    """Deterministic pseudo-random bytes (different seeds give different content)."""
    return random.Random(f"albumfs-{seed}").randbytes(size)


def write(path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def create(path, mode: int = 0o644) -> None:
    """Create an empty file with open(2) O_CREAT|O_EXCL (raises OSError on refusal)."""
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)
    os.close(fd)


def names(path) -> list[str]:
    """Sorted entry names of a directory (str)."""
    return sorted(os.listdir(path))


def bnames(path) -> list[bytes]:
    """Sorted entry names of a directory, as raw bytes."""
    return sorted(os.listdir(os.fsencode(path)))


def bjoin(directory, name: bytes) -> bytes:
    return os.path.join(os.fsencode(directory), name)


def ino(path) -> int:
    return os.stat(path).st_ino


def nlink(path) -> int:
    return os.stat(path).st_nlink


def current_umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def settle_frees(store) -> None:
    """Where STORE is mounted, a statfs of the mount first: a purge's data is freed after its
    reply, and `df` is what waits for it (SEMANTICS.md § Recently Deleted: "its storage is
    freed at once (df shows it)"). The mount table names a mount by its store (fsname)."""
    store = os.path.realpath(os.fspath(store))
    for source, mount_point, kind, _options in mount_entries():
        if kind == "fuse.albumfs" and source == store:
            os.statvfs(mount_point)


def content_files(store) -> list[str]:
    """Paths of the asset data files under STORE/content (STORE/content/xx/<16 hex id>;
    the content directory's own marker file is not asset data), as `df` of its mount sees it."""
    settle_frees(store)
    root = os.path.join(os.fspath(store), "content")
    found = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            if dirpath != root and stat.S_ISREG(os.lstat(path).st_mode):
                found.append(path)
    return found


def content_usage(store) -> tuple[int, int]:
    """(number, total size) of the asset data files under STORE/content."""
    files = content_files(store)
    return len(files), sum(os.lstat(path).st_size for path in files)


def all_entries(mp, *, deleted: bool = False) -> dict[bytes, int]:
    """Every file entry of the live library below the mount (relative bytes path -> st_ino): the
    roll and the albums, not the computed views (By Date, Smart Albums: they follow the facts read
    after each close); with deleted=True, Recently Deleted's too."""
    out = {}
    root = os.fsencode(mp)
    for dirpath, dirs, files in os.walk(root):
        if dirpath == root:
            skipped = {b"By Date", b"Smart Albums"} | (set() if deleted else {b"Recently Deleted"})
            dirs[:] = [d for d in dirs if d not in skipped]
        for name in files:
            p = os.path.join(dirpath, name)
            out[os.path.relpath(p, root)] = os.lstat(p).st_ino
    return out


def sha256(what, bufsize: int = MiB) -> str:
    """SHA-256 (64 lowercase hex digits) of bytes, or of the file a path (str or os.PathLike)
    names, read `bufsize` at a time."""
    if isinstance(what, (bytes, bytearray, memoryview)):
        return hashlib.sha256(what).hexdigest()
    return read_digest(what, bufsize)[1]


def read_digest(path, bufsize: int = MiB) -> tuple[int, str]:
    """(bytes read, SHA-256) of a whole file, read `bufsize` at a time."""
    h = hashlib.sha256()
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(bufsize)
            if not b:
                break
            n += len(b)
            h.update(b)
    return n, h.hexdigest()


def user_xattrs(path) -> dict[str, bytes]:
    return {k: os.getxattr(path, k, follow_symlinks=False)
            for k in os.listxattr(path, follow_symlinks=False) if k.startswith("user.")}


# --- errno checks -----------------------------------------------------------


def _errname(e: int) -> str:
    return errno.errorcode.get(e, str(e))


def expect_errno(expected, fn, *args, **kw) -> OSError:
    """Call fn(*args) and assert it fails with one of the expected errno values."""
    want = expected if isinstance(expected, tuple) else (expected,)
    want_s = "/".join(_errname(e) for e in want)
    try:
        fn(*args, **kw)
    except OSError as e:
        assert e.errno in want, f"{fn.__name__}{args!r}: got {_errname(e.errno)} ({e}), want {want_s}"
        return e
    raise AssertionError(f"{fn.__name__}{args!r} succeeded, want {want_s}")


_libc = ctypes.CDLL(None, use_errno=True)
_libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
_libc.renameat2.restype = ctypes.c_int


def renameat2(src, dst, flags: int) -> None:
    """renameat2(2) through libc; raises OSError like os.rename."""
    s, d = os.fsencode(src), os.fsencode(dst)
    if _libc.renameat2(AT_FDCWD, s, AT_FDCWD, d, flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), os.fsdecode(s), None, os.fsdecode(d))


# --- other users, other filesystems ------------------------------------------

NOBODY = 65534


def a_normal_user() -> int:
    """The uid of a real unprivileged account (the first of 1000–59999), else nobody's."""
    return next((e.pw_uid for e in pwd.getpwall() if 1000 <= e.pw_uid < 60000), NOBODY)


def as_user(cmd, *, uid: int = NOBODY, gid: int = NOBODY, timeout: float = 60,
            check: bool = False) -> subprocess.CompletedProcess:
    """Run cmd as another uid/gid with no supplementary groups (setpriv), LC_ALL=C, text output."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"}
    return run(["setpriv", "--reuid", str(uid), "--regid", str(gid), "--clear-groups", *cmd],
               timeout=timeout, check=check, env=env, text=True, errors="backslashreplace")


_public_albumfs: Path | None = None


def public_albumfs() -> Path:
    """The binary under test, copied once a session into a directory every user can enter
    (/tmp/albumfs-bin-XXXXXX, 0755). Every test that runs albumfs as another user (setpriv)
    runs this copy, never ALBUMFS: the checkout may live under a 0700 directory (a home, a
    private temporary directory), where the other user's exec fails with "Permission denied"
    before albumfs even starts. remove_public_albumfs() (conftest, at the session's end) removes it."""
    global _public_albumfs
    if _public_albumfs is None:
        directory = Path(tempfile.mkdtemp(prefix="albumfs-bin-", dir="/tmp"))
        os.chmod(directory, 0o755)
        binary = directory / "albumfs"
        shutil.copy2(ALBUMFS, binary)
        os.chmod(binary, 0o755)
        _public_albumfs = binary
    return _public_albumfs


def remove_public_albumfs() -> None:
    global _public_albumfs
    if _public_albumfs is not None:
        shutil.rmtree(_public_albumfs.parent, ignore_errors=True)
        _public_albumfs = None


@contextlib.contextmanager
def public_tmpdir(prefix: str = "albumfs-"):
    """A fresh directory under /tmp, mode 0755, so that other users can traverse it (pytest's
    tmp_path is under a 0700 directory). Removed afterwards, unless something is still
    mounted below it (then it is left for inspection rather than followed into a mount)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        prefix_ = os.fspath(path) + "/"
        if not any(e[1] == os.fspath(path) or e[1].startswith(prefix_) for e in mount_entries()):
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def small_tmpfs(path, size: str):
    """Mount a tmpfs of the given size (e.g. "20m") on path (needs root); always unmounted."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "albumfs-test-tmpfs", path], timeout=30)
    try:
        yield path
    finally:
        if is_mounted(path):
            if run(["umount", path], check=False, timeout=30).returncode != 0:
                run(["umount", "-l", path], check=False, timeout=30)


# --- processes --------------------------------------------------------------


def wait_all(procs, timeout: float, mount, what: str = "workers") -> None:
    """Wait for every process (subprocess.Popen or multiprocessing.Process) up to `timeout`
    seconds in all. Any still running then is a deadlock: record the daemon's thread stacks,
    abort the FUSE connection (so nothing stays blocked), kill the processes, and fail."""
    deadline = time.monotonic() + timeout
    for p in procs:
        left = max(0.0, deadline - time.monotonic())
        if hasattr(p, "returncode") and hasattr(p, "communicate"):
            try:
                p.wait(timeout=left)
            except subprocess.TimeoutExpired:
                pass
        else:
            p.join(timeout=left)
    running = [p for p in procs if (p.poll() is None if hasattr(p, "poll") else p.is_alive())]
    if not running:
        return
    stacks = thread_stacks(mount.proc.pid) if mount.proc is not None else "(no daemon)"
    aborted = abort_fuse_connection(mount.abort_file)
    for p in running:
        try:
            p.kill()
        except OSError:
            pass
    raise AssertionError(
        f"deadlock: {len(running)} of {len(procs)} {what} still running after {timeout:.0f} s "
        f"(FUSE connection {'aborted' if aborted else 'NOT aborted: no fusectl'})\n"
        f"--- daemon threads (kernel stacks) ---\n{stacks}")



def vm_hwm_kib(pid: int) -> int:
    """Peak resident set size (VmHWM) of a process, in KiB."""
    kib = proc_status_kib(pid, "VmHWM")
    assert kib is not None, f"no VmHWM in /proc/{pid}/status"
    return kib


def proc_io(pid: int) -> dict[str, int]:
    """/proc/PID/io: bytes (rchar, wchar) and calls (syscr, syscw) of a process's read/write syscalls."""
    with open(f"/proc/{pid}/io") as f:
        return {key: int(value) for key, value in (line.split(": ") for line in f.read().splitlines())}


def daemon_children(daemon_pid: int, subcommand: bytes) -> list[tuple[int, list[bytes]]]:
    """The daemon's child processes running `albumfs SUBCOMMAND` (pid, argv)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if ppid == daemon_pid and subcommand in argv:
                found.append((int(entry), argv))
    return found


def rsync_files_transferred(stats_output: str) -> int:
    m = re.search(r"Number of regular files transferred: ([\d,.]+)", stats_output)
    assert m, f"no transfer count in rsync --stats output:\n{stats_output}"
    return int(re.sub(r"[,.]", "", m.group(1)))


# --- crash test settings ----------------------------------------------------


def _crash_seed() -> int:
    env = os.environ.get("ALBUMFS_CRASH_SEED")
    if env:
        return int(env)
    return int.from_bytes(os.urandom(4), "big")


CRASH_ITERATIONS = int(os.environ.get("ALBUMFS_CRASH_ITERATIONS", "20"))
CRASH_SEED = _crash_seed()
