"""What every part of the bench uses: its errors and log, the runner of timed shell commands,
the watchdog of its own file operations, and its Mount (albumfs_mount's supervisor, which the
integration tests use too)."""
import contextlib
import os
import shlex
import statistics
import subprocess
import sys
import threading
import time

from albumfs_mount import Mount as AlbumfsMount, kill_group

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # scripts/lib
REPO = os.path.dirname(os.path.dirname(HERE))
MARKER = ".albumfs-bench"
MiB = 1 << 20
GiB = 1 << 30


class BenchError(Exception):
    pass


class Terminated(BaseException):
    pass


def log(message):
    sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


def q(path):
    return shlex.quote(path)


def median(values):
    return statistics.median(values) if values else float("nan")


def human_bytes(n):
    if n >= GiB and n % GiB == 0:
        return f"{n // GiB} GiB"
    if n >= MiB and n % MiB == 0:
        return f"{n // MiB} MiB"
    return f"{n // 1024} KiB"


class Runner:
    """Runs shell commands in their own session with a timeout; a command that
    does not end in time is killed with its whole process group."""

    def __init__(self, on_stuck):
        self.current = None
        self.on_stuck = on_stuck

    def run(self, command, timeout, capture=False, check=True):
        """Runs `command` under bash; returns (seconds, stdout or None)."""
        start = time.perf_counter()
        process = subprocess.Popen(["bash", "-c", "set -o pipefail; " + command], start_new_session=True,
                                   stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
        self.current = process
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill(process)
            raise BenchError(f"timed out after {timeout} s: {command}")
        finally:
            self.current = None
        seconds = time.perf_counter() - start
        if check and process.returncode != 0:
            raise BenchError(f"failed (exit {process.returncode}): {command}\n{err.strip()}")
        return seconds, out

    def kill(self, process):
        kill_group(process, 15, on_stuck=self.on_stuck, log=log)

    def kill_current(self):
        if self.current is not None and self.current.poll() is None:
            self.kill(self.current)


class Watchdog:
    """Bounds the bench's own file operations on the mount, which no subprocess
    timeout covers: when a phase overruns, `on_expire` kills the daemons, so
    every request waiting on them fails (ENOTCONN) instead of hanging."""

    def __init__(self, on_expire):
        self.on_expire = on_expire
        self.deadline = None
        self.what = None
        self.expired = None
        self.lock = threading.Lock()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self):
        while True:
            time.sleep(0.5)
            with self.lock:
                overdue = self.deadline is not None and time.monotonic() > self.deadline
                what = self.what
                if overdue:
                    self.deadline = None
            if overdue:
                self.expired = what
                log(f"HUNG: {what} did not finish in time: stopping the daemons")
                self.on_expire()

    @contextlib.contextmanager
    def phase(self, what, seconds):
        with self.lock:
            self.deadline, self.what = time.monotonic() + seconds, what
        try:
            yield
        except OSError as error:
            if self.expired == what:
                raise BenchError(f"{what} hung (the daemon was stopped after {seconds:.0f} s): {error}")
            raise
        finally:
            with self.lock:
                self.deadline = None


class Mount(AlbumfsMount):
    """One albumfs mount made with `albumfs mount --store STORE --create MOUNTPOINT` (the bench's
    stores are its own, made on first mount; create=False for a store made by `albumfs init`,
    as W8's stores with a remote are); the supervisor is albumfs_mount's, shared with the
    tests. Here ending a mount is a best effort that logs what went wrong."""

    def __init__(self, binary, store, mountpoint, options=(), create=True):
        # The daemon's freedesktop thumbnail cache (SEMANTICS.md § Thumbnails) is in the bench's
        # work dir, never the user's: listings write into it as they would into ~/.cache.
        cache = os.path.join(os.path.dirname(os.path.abspath(str(store))), "xdg-cache")
        os.makedirs(cache, exist_ok=True)
        super().__init__(binary, store, mountpoint, options=options, create=create, env={"XDG_CACHE_HOME": cache})

    def io_uring_count(self):
        """The io_urings the daemon holds (-o uring: one per ring entry)."""
        fds = f"/proc/{self.pid}/fd"
        count = 0
        for fd in os.listdir(fds):
            try:
                count += os.readlink(os.path.join(fds, fd)) == "anon_inode:[io_uring]"
            except OSError:
                pass
        return count

    def kill(self):
        """The last resort for a hung mount: the daemon dies, the kernel fails every request
        waiting on it, and the mount can be unmounted."""
        if self.daemon_alive():
            log(f"killing the albumfs daemon {self.pid}")
        self.break_loose()

    def unmount(self):
        """fusermount3 -u (a few tries), then -uz; waits for the daemon to end, then kills it."""
        for problem in self.cleanup(tries=3):
            log(f"{self.mp}: {problem}")
