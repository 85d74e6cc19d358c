"""Mounting albumfs and watching over its daemon, for the integration tests (Tests/integration,
through albumfs_testlib and conftest) and the benchmark (scripts/lib/bench/) alike.

Nothing here touches a mount's files: the mount table and the processes are read from /proc, a
hung mount is broken loose through fusectl (/sys/fs/fuse/connections/N/abort), and every wait
has a bound. Errors are MountError, whose message says what happened (with the daemon's log
where there is one); the tests turn it into a failure, the bench into its own error.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

MOUNT_WAIT = 30.0   # a mount must be in the mount table this long after its start (no bound in the
                    # contract: room for a start-up on a loaded machine)
EXIT_WAIT = 10.0    # the daemon must end this long after its unmount (SEMANTICS.md: "within a few seconds")
KILL_WAIT = 5.0     # a SIGKILLed daemon still alive after this has a thread stuck in the kernel


class MountError(Exception):
    """A mount that did not start, did not end, or is not there; the message says why."""


# --- the mount table --------------------------------------------------------------------


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_entries() -> list[tuple[str, str, str, str]]:
    """(source, mount point, type, options) of every line in /proc/mounts."""
    out = []
    with open("/proc/mounts", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.split(" ")
            if len(fields) >= 4:
                out.append(tuple(_unescape(x) for x in fields[:4]))
    return out


def mount_entry(mp) -> tuple[str, str, str, str] | None:
    """The entry of the mount at mp (the top of the stack), or None."""
    mp = os.path.abspath(os.fspath(mp))
    found = None
    for entry in mount_entries():
        if entry[1] == mp:
            found = entry
    return found


def is_mounted(mp) -> bool:
    return mount_entry(mp) is not None


def mount_points_below(directory) -> list[str]:
    """The mount points strictly below directory."""
    prefix = os.path.abspath(os.fspath(directory)) + "/"
    return [entry[1] for entry in mount_entries() if entry[1].startswith(prefix)]


def fuse_connection_abort_file(mp) -> str | None:
    """/sys/fs/fuse/connections/N/abort of the mount at mp, if fusectl is mounted.

    Found through /proc/self/mountinfo, so it never touches the (maybe hung) mount."""
    mp = os.path.abspath(os.fspath(mp))
    found = None
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                fields = line.split(" ")
                if len(fields) > 4 and _unescape(fields[4]) == mp:
                    major, minor = (int(x) for x in fields[2].split(":"))
                    found = f"/sys/fs/fuse/connections/{(major << 20) | minor}/abort"
    except OSError:
        return None
    return found if found and os.path.exists(found) else None


def ensure_fusectl() -> bool:
    """Mount fusectl on /sys/fs/fuse/connections when it is not (as root); True if it is there.

    Systems with systemd mount it at boot; containers often do not."""
    if any(e[2] == "fusectl" for e in mount_entries()):
        return True
    if os.geteuid() != 0 or not os.path.isdir("/sys/fs/fuse/connections"):
        return False
    quiet(["mount", "-t", "fusectl", "fusectl", "/sys/fs/fuse/connections"])
    return any(e[2] == "fusectl" for e in mount_entries())


def abort_fuse_connection(abort_file: str | None) -> bool:
    """Write 1 to a fusectl abort file: every request of that connection fails with ENOTCONN."""
    if not abort_file:
        return False
    try:
        with open(abort_file, "w") as f:
            f.write("1")
        return True
    except OSError:
        return False


# --- processes --------------------------------------------------------------------------


def quiet(cmd, timeout: float = 30) -> bool:
    """Run a clean-up command; never raise. True when it exited 0."""
    try:
        return subprocess.run([os.fspath(c) for c in cmd], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=timeout).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def kill_group(process: subprocess.Popen, wait: float, on_stuck=None, log=None) -> None:
    """SIGKILLs a process group (a process started with start_new_session) and waits for it, at
    most `wait` seconds. A process stuck in the kernel on a FUSE request gets `on_stuck` (which
    breaks the mount) and one more wait; one that even then does not die is abandoned, never
    waited for without a bound."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    for attempt in range(2 if on_stuck else 1):
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            if on_stuck and attempt == 0:
                on_stuck()
    if log:
        log(f"process {process.pid} does not die; leaving it")


def run_bounded(argv, timeout: float, env: dict | None = None) -> tuple[int | None, str, str]:
    """Runs argv (in env, default this process's); returns (exit status, stdout, stderr), status
    None when it did not end in time (then it is killed, see kill_group)."""
    process = subprocess.Popen([os.fspath(a) for a in argv], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, env=env)
    try:
        out, err = process.communicate(timeout=timeout)
        return process.returncode, out, err
    except subprocess.TimeoutExpired:
        kill_group(process, 5)
        return None, "", ""


def process_state(pid: int | str) -> str | None:
    """The state letter of a process (R, S, D, T, Z, ...), or None when it is gone. pid may
    name a thread: "PID/task/TID"."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def proc_status_kib(pid: int, field: str) -> int | None:
    """A field of /proc/PID/status in KiB (VmHWM, VmRSS), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, TypeError):
        pass
    return None


def thread_stacks(pid: int) -> str:
    """State, wait channel and kernel stack of every thread of a process (for hang reports)."""
    out = []
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError:
        return f"(no /proc/{pid})"
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        state = process_state(f"{pid}/task/{tid}")
        try:
            with open(f"{base}/wchan") as f:
                wchan = f.read().strip()
            try:
                with open(f"{base}/stack") as f:
                    stack = "".join("      " + line for line in f.readlines()[:8])
            except OSError:
                stack = ""
        except OSError:
            continue
        if state is None:
            continue
        out.append(f"  thread {tid} state {state} wchan {wchan}\n{stack}".rstrip())
    return "\n".join(out)


def _argv(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return None


def pids_mentioning(text: str) -> list[int]:
    """Pids of processes (other than this one) with text inside one of their arguments."""
    want = os.fsencode(text)
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        argv = _argv(int(d))
        if argv and any(want in a for a in argv):
            out.append(int(d))
    return out


def daemon_pids(store) -> list[int]:
    """The albumfs daemons serving store: `albumfs mount … --store STORE …` by their command line."""
    want = os.fsencode(os.fspath(store))
    out = []
    for pid in pids_mentioning(os.fspath(store)):
        argv = _argv(pid) or [b""]
        if os.path.basename(argv[0]).startswith(b"albumfs") and b"mount" in argv and want in argv:
            out.append(pid)
    return out


def stop_background_mount(mp, store, timeout: float = EXIT_WAIT) -> list[int]:
    """Unmount a mount made outside a Mount (fusermount3 -u, then -uz), wait up to `timeout` for
    every process naming `store` to end, kill -9 the ones still there, and return their pids
    (a test asserts the list is empty: the daemon must go by itself)."""
    for flag in ("-u", "-uz"):
        if is_mounted(mp):
            quiet(["fusermount3", flag, mp])
    deadline = time.monotonic() + timeout
    while pids_mentioning(os.fspath(store)) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = pids_mentioning(os.fspath(store))
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


# --- the supervisor ---------------------------------------------------------------------


class Mount:
    """One albumfs mount of `store` on `mp`, and its daemon.

    - start(): `albumfs mount --store STORE -f MP` as a child process, its output appended to
      `log`; returns once MP is in the mount table (the daemon: .proc).
    - mount(): the background form, `albumfs mount --store STORE MP`, which returns once the
      mount is live; the daemon is then found by its command line (.pid). Returns the seconds
      the command took.
    - unmount(): fusermount3 -u; the daemon must end within EXIT_WAIT (a child: with status 0).
    - cleanup(): the best effort that always ends it (-u, -uz, then kill -9); returns what went wrong.
    - kill(): kill -9 the daemon (a crash) and detach the dead mount; break_loose(): abort the
      connection and kill -9, from any thread, without waiting (for a hung mount).

    prefix: words before the binary (e.g. setpriv … to run it as another user); env: added to the
    daemon's environment when it starts; options: the -o options of every start; create: mount
    with --create (the first start makes the store)."""

    def __init__(self, binary, store, mp, *, log=None, options=(), prefix=(), env=None,
                 create: bool = False):
        self.binary, self.store, self.mp = binary, store, mp
        self.log = Path(log) if log is not None else None
        self.options = list(options)
        self.prefix = [os.fspath(p) for p in prefix]
        self.env = dict(env or {})
        self.create = create
        self.proc: subprocess.Popen | None = None   # the daemon, when started with start()
        self.pid: int | None = None                 # the daemon's pid, either way
        self.abort_file: str | None = None          # fusectl abort file of the current connection
        self.starts = 0
        self._lock = threading.Lock()

    # -- starting

    def _command(self, foreground: bool, options, flags) -> list[str]:
        cmd = [*self.prefix, os.fspath(self.binary), "mount", "--store", os.fspath(self.store)]
        if self.create:
            cmd.append("--create")
        if foreground:
            cmd.append("-f")
        cmd += [*(flags or []), os.fspath(self.mp)]
        options = self.options + list(options or [])
        if options:
            cmd += ["-o", ",".join(options)]
        return cmd

    def log_text(self) -> str:
        if self.log is None:
            return "(no log)"
        try:
            return self.log.read_text(errors="backslashreplace")[-20000:]
        except OSError:
            return "(no log)"

    def start(self, options=None, flags=None) -> None:
        """Start the daemon in the foreground (-f [FLAGS]) and wait until MP is in the mount
        table; MountError if it exits first or is not mounted within MOUNT_WAIT."""
        if is_mounted(self.mp):
            raise MountError(f"{self.mp} is already mounted")
        self.starts += 1
        cmd = self._command(True, options, flags)
        env = {**os.environ, **self.env}
        with open(self.log if self.log is not None else os.devnull, "ab") as log:
            log.write(f"\n===== start #{self.starts}: {' '.join(cmd)}\n".encode())
            log.flush()
            with self._lock:
                self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, env=env)
                self.pid = self.proc.pid
        deadline = time.monotonic() + MOUNT_WAIT
        while not is_mounted(self.mp):
            rc = self.proc.poll()
            if rc is not None:
                raise MountError(f"albumfs exited with status {rc} before mounting {self.mp}\n"
                                 f"--- log ---\n{self.log_text()}")
            if time.monotonic() > deadline:
                raise MountError(f"{self.mp} not mounted {MOUNT_WAIT:.0f} s after starting albumfs\n"
                                 f"--- log ---\n{self.log_text()}")
            time.sleep(0.02)
        self.abort_file = fuse_connection_abort_file(self.mp)

    def mount(self, timeout: float = 60) -> float:
        """The background form: returns the seconds `albumfs mount` took to return."""
        os.makedirs(self.mp, exist_ok=True)
        if is_mounted(self.mp):
            raise MountError(f"{self.mp} is already mounted")
        self.starts += 1
        start = time.perf_counter()
        # The daemon it leaves behind has this environment too (keys, XDG_CACHE_HOME).
        status, _, err = run_bounded(self._command(False, None, None), timeout, env={**os.environ, **self.env})
        seconds = time.perf_counter() - start
        pids = daemon_pids(self.store)
        with self._lock:
            self.proc, self.pid = None, pids[0] if pids else None
        if status is None:
            raise MountError(f"albumfs mount did not return within {timeout} s")
        if status != 0:
            raise MountError(f"albumfs mount failed (exit {status}): {err.strip()}")
        if self.pid is None:
            raise MountError(f"no daemon found for the store {self.store}")
        self.abort_file = fuse_connection_abort_file(self.mp)
        self.check()
        return seconds

    # -- the daemon

    def is_mounted(self) -> bool:
        return is_mounted(self.mp)

    def daemon_alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return self.pid is not None and process_state(self.pid) not in (None, "Z")

    def check(self) -> None:
        """Before using the mount: it must be mounted (read from the mount table) and its daemon
        running, not stopped."""
        if self.pid is not None and not self.daemon_alive():
            raise MountError(f"the albumfs daemon ({self.pid}) is gone")
        if self.pid is not None and process_state(self.pid) == "T":
            raise MountError(f"the albumfs daemon ({self.pid}) is stopped")
        if not is_mounted(self.mp):
            raise MountError(f"{self.mp} is not mounted")

    def status(self, field: str) -> int | None:
        """A field of the daemon's /proc status in KiB (VmHWM, VmRSS), or None."""
        return proc_status_kib(self.pid, field) if self.pid is not None else None

    def reset_peak(self) -> bool:
        """Resets VmHWM to the current RSS (clear_refs 5); False when not allowed."""
        try:
            with open(f"/proc/{self.pid}/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def wait_exit(self, timeout: float) -> bool:
        """Wait up to timeout for the daemon to end; True when it has (or there is none)."""
        if self.proc is not None:
            try:
                self.proc.wait(timeout=timeout)
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline = time.monotonic() + timeout
        while self.daemon_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.daemon_alive():
            return False
        with self._lock:
            self.pid = None   # gone: its pid may be another process's soon
        return True

    # -- ending

    def unmount(self) -> None:
        """fusermount3 -u, then the daemon must exit (with status 0, a child) within EXIT_WAIT."""
        status, out, err = run_bounded(["fusermount3", "-u", self.mp], 30)
        if status != 0:
            raise MountError(f"fusermount3 -u {self.mp}: "
                             + ("timed out" if status is None else f"exit {status}: {(out + err).strip()}"))
        if not self.wait_exit(EXIT_WAIT):
            raise MountError(f"daemon still running {EXIT_WAIT:.0f} s after unmount\n"
                             f"--- log ---\n{self.log_text()}")
        if is_mounted(self.mp):
            raise MountError(f"{self.mp} still mounted after fusermount3 -u")
        rc = self.proc.returncode if self.proc is not None else 0
        if rc != 0:
            raise MountError(f"daemon exited with status {rc} after unmount\n--- log ---\n{self.log_text()}")

    def break_loose(self) -> None:
        """For a hung mount, from any thread, without waiting: abort the FUSE connection (every
        request waiting on it fails with ENOTCONN) and kill -9 the daemon."""
        abort_fuse_connection(fuse_connection_abort_file(self.mp) or self.abort_file)
        self._sigkill()

    def _sigkill(self) -> None:
        with self._lock:
            proc, pid = self.proc, self.pid
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
        elif pid is not None and process_state(pid) not in (None, "Z"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def reap_killed(self, wait: float = KILL_WAIT) -> str | None:
        """Wait for a SIGKILLed daemon. One that does not die has a thread stuck in the kernel
        (waiting on its own mount): abort the FUSE connection so that it and every caller
        blocked on the mount get free, and return what the threads were stuck in."""
        if self.wait_exit(wait):
            return None
        stacks = thread_stacks(self.pid)
        aborted = abort_fuse_connection(self.abort_file)
        self.wait_exit(EXIT_WAIT)
        return (f"the daemon (pid {self.pid}) was still alive {wait:.0f} s after SIGKILL: "
                f"a thread stuck in the kernel keeps the dead mount's callers blocked for good; "
                + ("the FUSE connection was aborted" if aborted else
                   "the FUSE connection could NOT be aborted (no fusectl): processes stay hung")
                + f"\n--- daemon threads (kernel stacks) ---\n{stacks}")

    def kill(self) -> None:
        """kill -9 the daemon (a crash), then detach its dead mount."""
        self._sigkill()
        stuck = self.reap_killed()
        quiet(["fusermount3", "-u", self.mp])
        if is_mounted(self.mp):
            quiet(["fusermount3", "-uz", self.mp])
        if stuck:
            raise MountError(stuck)
        if is_mounted(self.mp):
            raise MountError(f"could not detach {self.mp} after kill -9")

    def cleanup(self, tries: int = 1) -> list[str]:
        """Always unmount and end the daemon; return what went wrong. tries: fusermount3 -u
        attempts, 1 s apart (a mount may be busy for a moment after a workload), before -uz."""
        problems = []
        for attempt in range(tries):
            if not is_mounted(self.mp) or quiet(["fusermount3", "-u", self.mp]):
                break
            if attempt + 1 < tries:
                time.sleep(1)
        if is_mounted(self.mp):
            problems.append("fusermount3 -u failed at cleanup; used fusermount3 -uz")
            quiet(["fusermount3", "-uz", self.mp])
        if self.daemon_alive() and not self.wait_exit(EXIT_WAIT):
            problems.append(f"daemon still running {EXIT_WAIT:.0f} s after unmount: killed (-9)\n"
                            f"--- daemon threads (kernel stacks) ---\n{thread_stacks(self.pid)}")
            self._sigkill()
            stuck = self.reap_killed()
            if stuck:
                problems.append(stuck)
        if is_mounted(self.mp):
            quiet(["fusermount3", "-uz", self.mp])
        return problems
