"""Integration tests for albumfs: every test mounts the real binary on a fresh store.

Run:   python3 -m pytest Tests/integration          (as root, as CI does, or as a
       user who may open /dev/fuse)

- Binary: $ALBUMFS_BIN, else <repo>/.build/release/albumfs (or .build/debug/albumfs
  when there is no release build). The header of the pytest run says which.
- These tests never skip for lack of FUSE: a missing /dev/fuse, fusermount3, test
  tool (rsync, attr's setfattr/getfattr, cmp) or binary FAILS the whole session,
  so CI cannot go green without really mounting.
- Fixture `mount` (function scope): a fresh store (`albumfs init STORE`) and mount point
  under the test's tmp_path; `albumfs mount --store STORE -f MP` runs in the foreground, its output
  in tmp_path/albumfs.log (printed when a test fails). It yields a `Mount` with
  .store .mp .roll .albums .proc .log and .unmount() .remount() .start() .kill().
  Cleanup always runs: `fusermount3 -u`, then `-uz`, then waits 10 s for the
  daemon and kill -9s it (reported as an error: the contract wants the daemon gone
  within seconds of the unmount).
- Teardown also fails a test whose mount vanished or whose daemon died while the
  test ran (a vanished FUSE mount makes later writes land in the underlying
  directory and pass for the wrong reason).
- Fixture `mount_factory` (function scope): `new(name, store=None, mp=None, options=None,
  start=True, make_store=True, uid=None, env=None, base=None)` makes more such mounts (own store
  and mount point, default under tmp_path/name; uid: the daemon runs as that user; env: added
  to its environment), for tests that need several stores or a store/mount point in a
  particular place (a small tmpfs, a directory other users can traverse). With
  make_store=False no store is made beforehand: the first start mounts with `--create`. Every one is
  watched and cleaned up like `mount`.
- Watchdog: a test that outlives its budget (default 300 s; marker
  `@pytest.mark.mount_timeout(SECONDS)`) gets its FUSE connection aborted and its
  daemon killed, so a blocked syscall fails with ENOTCONN instead of hanging CI.
  Aborting needs fusectl: the session mounts it on /sys/fs/fuse/connections when it
  is missing (as root; containers often lack it). A daemon still alive 5 s after
  SIGKILL (a thread stuck in the kernel, e.g. on a directory lock its own dead
  request holds) is reported with its threads' kernel stacks and its connection is
  aborted, so that neither it nor the processes using the mount stay hung.
- $ALBUMFS_TEST_OPTIONS (comma-separated) is added to every mount's `-o`.
- $ALBUMFS_TEST_REMOTE=1: every store a fixture makes for root has a remote
  (SEMANTICS.md § Remote storage): a bucket of its own on one radosgw the session
  starts and stops. A mount the test leaves mounted is then checked at its end:
  `albumfs sync --wait` (every closed photo in the bucket), and once unmounted
  `fsck` and `fsck --remote` are clean. scripts/test runs the concurrency and
  data-path tests so, on both data paths.
- Every subprocess has a timeout; `run()` checks the exit status and shows the
  output of a failed command.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from albumfs_testlib import (  # noqa: F401  (run is re-exported for tests); first: it finds albumfs_mount
    ALBUMFS,
    CRASH_ITERATIONS,
    CRASH_SEED,
    ensure_fusectl,
    is_mounted,
    public_albumfs,
    public_tmpdir,
    remove_public_albumfs,
    run,
)
from albumfs_mount import Mount as AlbumfsMount, MountError, quiet  # noqa: E402
from objectstore import ObjectStore, running_object_store  # noqa: E402

DEFAULT_TEST_TIMEOUT = 300
# Options every mount of the run gets first, e.g. ALBUMFS_TEST_OPTIONS=nopassthrough
# (scripts/test runs the data-path tests a second time so).
EXTRA_MOUNT_OPTIONS = [o for o in os.environ.get("ALBUMFS_TEST_OPTIONS", "").split(",") if o]
REMOTE = os.environ.get("ALBUMFS_TEST_REMOTE") == "1"
REMOTE_SYNC_TIMEOUT = 180   # uploads are eventual; sync --wait is the event, this only its bound
_session_gateway: list[ObjectStore] = []   # the radosgw of an ALBUMFS_TEST_REMOTE run


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "mount_timeout(seconds): watchdog budget of a test that uses the mount fixture")


def pytest_report_header(config):
    return [f"albumfs binary: {ALBUMFS}, extra mount options: {','.join(EXTRA_MOUNT_OPTIONS) or 'none'}"
            + (", every store with a remote (ALBUMFS_TEST_REMOTE=1)" if REMOTE else ""),
            f"crash test: ALBUMFS_CRASH_SEED={CRASH_SEED} ALBUMFS_CRASH_ITERATIONS={CRASH_ITERATIONS}"]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    setattr(item, "rep_" + rep.when, rep)
    return rep


@pytest.fixture(scope="session", autouse=True)
def fuse_environment():
    """Fail (never skip) the session when the machine cannot run these tests."""
    problems = []
    if not os.path.exists("/dev/fuse"):
        problems.append("/dev/fuse is missing (FUSE is required; these tests do not skip)")
    for tool, package in [("fusermount3", "fuse3"), ("rsync", "rsync"), ("setfattr", "attr"),
                          ("getfattr", "attr"), ("cmp", "diffutils"), ("find", "findutils")]:
        if shutil.which(tool) is None:
            problems.append(f"{tool} is missing (Debian package {package})")
    if not (ALBUMFS.is_file() and os.access(ALBUMFS, os.X_OK)):
        problems.append(f"albumfs binary not found or not executable: {ALBUMFS} "
                        "(build it, or set ALBUMFS_BIN)")
    if problems:
        pytest.fail("cannot run the albumfs integration tests:\n  " + "\n  ".join(problems),
                    pytrace=False)
    # The watchdog and the reaping of a daemon that SIGKILL cannot end abort the FUSE
    # connection through fusectl; without it a deadlocked daemon hangs its callers for good.
    ensure_fusectl()
    if REMOTE:
        with running_object_store() as gateway:
            _session_gateway.append(gateway)
            yield
    else:
        yield
    remove_public_albumfs()   # the copy that other users run, if a test made it


class Mount(AlbumfsMount):
    """One store and one mount point; the daemon runs in the foreground (-f). The supervisor
    itself (start, unmount, kill, cleanup) is scripts/lib/albumfs_mount.py's, shared with the
    bench; here its errors fail the test."""

    def __init__(self, base: Path, store: Path | None = None, mp: Path | None = None,
                 make_store: bool = True, uid: int | None = None, env: dict | None = None):
        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        mp = mp if mp is not None else base / "mnt"
        mp.mkdir(parents=True, exist_ok=True)
        # uid: run the daemon as that user (uid = gid, no other groups), as a user's own mount.
        self.uid = uid
        as_owner = []
        if uid is not None:
            for p in (base, mp):
                os.chown(p, uid, uid)
            as_owner = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        # Another user runs the copy of the binary that every user can reach (the checkout may
        # be under a 0700 directory); root runs ALBUMFS itself.
        binary = ALBUMFS if uid is None else public_albumfs()
        # A named store is never created by a mount (SEMANTICS.md § Durability and safety):
        # made here with `albumfs init`, or by the first start with --create.
        # env: added to the daemon's environment (e.g. ALBUMFS_CLOCK_OFFSET). Its thumbnail cache
        # (SEMANTICS.md § Thumbnails) is the test's own, never the user's running the tests.
        self.thumbnail_home = base / "xdg-cache"
        self.thumbnail_home.mkdir(exist_ok=True)
        if uid is not None:
            os.chown(self.thumbnail_home, uid, uid)
        env = {"XDG_CACHE_HOME": str(self.thumbnail_home), **(env or {})}
        # ALBUMFS_TEST_REMOTE: a store made here for root has a remote, a bucket of its own.
        self.remote = REMOTE and make_store and store is None and uid is None
        remote_init = []
        if self.remote:
            gateway = _session_gateway[0]
            env |= {"AWS_ACCESS_KEY_ID": gateway.access_key, "AWS_SECRET_ACCESS_KEY": gateway.secret_key}
            bucket = "t" + hashlib.sha256(str(base).encode()).hexdigest()[:16]
            remote_init = ["--remote", f"s3://{bucket}/lib", "--endpoint", gateway.endpoint]
        super().__init__(binary, store if store is not None else base / "store", mp,
                         log=base / "albumfs.log", options=EXTRA_MOUNT_OPTIONS, prefix=as_owner,
                         env=env, create=not make_store)
        if make_store:
            run([*as_owner, binary, "init", *remote_init, self.store], timeout=30, env={**os.environ, **env})
        self.expect_mounted = False
        self.watchdog_fired = False

    @property
    def roll(self) -> Path:
        return self.mp / "Camera Roll"

    @property
    def albums(self) -> Path:
        return self.mp / "Albums"

    def start(self, options: list[str] | None = None, flags: list[str] | None = None) -> None:
        """Start `albumfs mount --store S -f [FLAGS] MP [-o ...]` and wait until MP is in
        /proc/mounts. flags: more of the mount command's own (e.g. -d: every request logged)."""
        assert not is_mounted(self.mp), f"{self.mp} is already mounted"
        try:
            super().start(options, flags)
        except MountError as error:
            pytest.fail(str(error), pytrace=False)
        finally:
            self.create = False   # only the first start makes the store
        self.expect_mounted = True

    def unmount(self) -> None:
        """fusermount3 -u, then the daemon must exit with status 0 within 10 s."""
        self.expect_mounted = False
        try:
            super().unmount()
        except MountError as error:
            pytest.fail(str(error), pytrace=False)

    def remount(self, options: list[str] | None = None) -> None:
        """Unmount, wait for the daemon, and mount the same store again."""
        self.unmount()
        self.start(options)

    def kill(self) -> None:
        """kill -9 the daemon (a crash), then detach its dead mount."""
        self.expect_mounted = False
        try:
            super().kill()
        except MountError as error:
            pytest.fail(str(error), pytrace=False)

    def check_remote(self) -> list[str]:
        """ALBUMFS_TEST_REMOTE, at a test's end while still mounted: every closed photo reaches
        the bucket (sync --wait), and once unmounted fsck and fsck --remote are clean. What
        failed, as lines for the test's report."""
        def albumfs(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([ALBUMFS, *args], env={**os.environ, **self.env}, capture_output=True,
                                  text=True, timeout=REMOTE_SYNC_TIMEOUT + 60, stdin=subprocess.DEVNULL)
        synced = albumfs("sync", "--wait", "--timeout", str(REMOTE_SYNC_TIMEOUT), str(self.mp))
        if synced.returncode != 0:
            return [f"albumfs sync --wait exited {synced.returncode}: {synced.stdout}{synced.stderr}"]
        self.unmount()
        problems = []
        for check in (["fsck", "--store", str(self.store)], ["fsck", "--remote", "--store", str(self.store)]):
            done = albumfs(*check)
            if done.returncode != 0:
                problems.append(f"albumfs {' '.join(check)} exited {done.returncode}: {done.stdout}{done.stderr}")
        return problems

    def watchdog(self) -> None:
        """Called from a timer thread when a test runs too long: break the mount loose."""
        self.watchdog_fired = True
        self.break_loose()
        quiet(["fusermount3", "-uz", self.mp])


@pytest.fixture
def pub():
    """A 0755 directory under /tmp that other users can traverse (public_tmpdir). Request it
    before mount_factory, so that the mounts below it are gone when it is removed."""
    with public_tmpdir() as d:
        yield d


@pytest.fixture
def mount(tmp_path, request):
    """A fresh store mounted at tmp_path/mnt; always unmounted afterwards."""
    m = Mount(tmp_path)
    budget = _budget(request)
    timer = threading.Timer(budget, m.watchdog)
    timer.daemon = True
    timer.start()
    late = []
    try:
        m.start()
        yield m
        # Checked before cleanup: the test's own results are only valid on a live mount.
        if m.expect_mounted and not m.watchdog_fired:
            if not is_mounted(m.mp):
                late.append(f"{m.mp} vanished from the mount table during the test")
            elif m.proc.poll() is not None:
                late.append(f"the daemon died during the test (status {m.proc.returncode})")
            elif m.remote and not _failed(request):
                late += m.check_remote()
    finally:
        timer.cancel()
        late += m.cleanup()
        late += _transport_problems([m])
        call = getattr(request.node, "rep_call", None)
        if late or m.watchdog_fired or (call is not None and call.failed):
            print(f"--- albumfs log ({m.log}) ---\n{m.log_text()}")
    if m.watchdog_fired:
        pytest.fail(f"watchdog: test ran longer than {budget} s; the mount was aborted", pytrace=False)
    if late:
        pytest.fail("\n".join(late), pytrace=False)


@pytest.fixture
def mount_factory(tmp_path, request):
    """new(name, store=None, mp=None, options=None, start=True) -> Mount: more mounts, each
    with its own store and mount point (default tmp_path/name/{store,mnt}); all unmounted
    afterwards, all under one watchdog (the test's mount_timeout budget)."""
    made: list[Mount] = []
    fired = threading.Event()
    budget = _budget(request)

    def on_timeout():
        fired.set()
        for m in list(made):
            m.watchdog()

    def new(name: str, store: Path | None = None, mp: Path | None = None,
            options: list[str] | None = None, start: bool = True, make_store: bool = True,
            uid: int | None = None, env: dict | None = None, base: Path | None = None) -> Mount:
        m = Mount(base or tmp_path / name, store=store, mp=mp, make_store=make_store, uid=uid, env=env)
        made.append(m)
        if start:
            m.start(options)
        return m

    timer = threading.Timer(budget, on_timeout)
    timer.daemon = True
    timer.start()
    late = []
    try:
        yield new
        if not fired.is_set():
            for m in made:
                if m.expect_mounted and not is_mounted(m.mp):
                    late.append(f"{m.mp} vanished from the mount table during the test")
                elif m.expect_mounted and m.proc.poll() is not None:
                    late.append(f"the daemon of {m.mp} died during the test (status {m.proc.returncode})")
                elif m.expect_mounted and m.remote and not _failed(request):
                    late += m.check_remote()
    finally:
        timer.cancel()
        for m in made:
            late += m.cleanup()
        late += _transport_problems(made)
        call = getattr(request.node, "rep_call", None)
        if late or fired.is_set() or (call is not None and call.failed):
            for m in made[-3:]:
                print(f"--- albumfs log ({m.log}) ---\n{m.log_text()[-6000:]}")
    if fired.is_set():
        pytest.fail(f"watchdog: test ran longer than {budget} s; its mounts were aborted", pytrace=False)
    if late:
        pytest.fail("\n".join(late), pytrace=False)


def _transport_problems(mounts) -> list[str]:
    """With ALBUMFS_TEST_OPTIONS=uring (scripts/test's io_uring pass, the kernel's enable_uring
    on): a mount that took /dev/fuse instead would prove nothing of the ring."""
    if "uring" not in EXTRA_MOUNT_OPTIONS:
        return []
    problems = []
    for m in mounts:
        # The whole log (log_text keeps its tail only); gone with a public dir the test removed.
        if m.starts and m.log is not None and m.log.exists() \
                and b"requests: FUSE over io_uring" not in m.log.read_bytes():
            problems.append(f"{m.mp} took requests through /dev/fuse, not io_uring (is enable_uring on?)")
    return problems


def _failed(request) -> bool:
    call = getattr(request.node, "rep_call", None)
    return call is not None and call.failed


def _budget(request) -> float:
    marker = request.node.get_closest_marker("mount_timeout")
    return marker.args[0] if marker else DEFAULT_TEST_TIMEOUT
