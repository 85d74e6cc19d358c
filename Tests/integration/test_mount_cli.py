"""The albumfs command line: SEMANTICS.md § Durability and safety (refused mounts, the mount table,
mount.fuse3, options, stores created only on purpose, failures that say why, unmount)."""

import contextlib
import errno
import os
import subprocess
import time

import pytest

from albumfs_testlib import (
    ALBUMFS, REFUSAL_WAIT, albumfs, as_user, attempt, daemon_children, expect_errno, create, is_mounted, mount_entry, names, pids_mentioning,
    public_albumfs, public_tmpdir, read, run, stop_background_mount, write,
)
from albumfs_mount import process_state


@pytest.mark.parametrize("foreground", [True, False], ids=["-f", "background"])
def test_second_mount_of_same_store_is_refused(mount, tmp_path, foreground):
    """SEMANTICS.md § Durability and safety (one daemon per store): a second albumfs mount of the same store is refused with a message; the first is unharmed."""
    write(mount.roll / "keep.jpg", b"keep me")
    mp2 = tmp_path / "mnt2"
    mp2.mkdir()
    cmd = [ALBUMFS, "mount", "--store", str(mount.store)] + (["-f"] if foreground else []) + [mp2]
    rc, err, mounted = attempt(cmd, tmp_path, [mp2])
    assert rc is not None, f"the second mount was still running after {REFUSAL_WAIT:.0f} s: it must be refused"
    assert not mounted, "the second mount of the same store was mounted"
    assert rc != 0
    assert err.strip(), "a refused mount must say why on stderr"

    assert mount.proc.poll() is None and is_mounted(mount.mp)
    assert read(mount.roll / "keep.jpg") == b"keep me"
    write(mount.roll / "more.jpg", b"more")
    assert names(mount.roll) == ["keep.jpg", "more.jpg"]


@pytest.mark.parametrize("foreground", [True, False], ids=["-f", "background"])
def test_missing_mount_point_is_refused(tmp_path, foreground):
    """SEMANTICS.md § Durability and safety: a mount point that does not exist → non-zero exit and a message."""
    store, missing = tmp_path / "store", tmp_path / "no-such-dir"
    albumfs("init", store)
    cmd = [ALBUMFS, "mount", "--store", str(store)] + (["-f"] if foreground else []) + [missing]
    rc, err, mounted = attempt(cmd, tmp_path, [missing])
    assert rc is not None and rc != 0, f"exit status {rc}"
    assert not mounted
    assert err.strip(), "a refused mount must say why on stderr"


@pytest.mark.parametrize("typo, closest", [("mout", "mount"), ("fsk", "fsck"), ("unmont", "unmount"), ("zzzzzz", None)])
def test_an_unknown_command_is_a_usage_error_naming_the_closest(tmp_path, typo, closest):
    """A typo of a command is exit 2 with the closest command named, never the `albumfs STORE
    MOUNTPOINT` form (which said "store cannot be used", exit 3); nothing is mounted or made."""
    mp = tmp_path / "mnt"
    mp.mkdir()
    p = subprocess.run([ALBUMFS, typo, str(mp)], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert f"unknown command '{typo}'" in p.stderr
    if closest:
        assert f"did you mean '{closest}'?" in p.stderr, p.stderr
    else:
        assert "did you mean" not in p.stderr
    assert sorted(os.listdir(tmp_path)) == ["mnt"] and os.listdir(mp) == []


def test_unknown_option_is_refused_with_status_2(tmp_path):
    """Durability/options: an unknown -o option is refused with a message and exit status 2."""
    store, mp = tmp_path / "store", tmp_path / "mnt"
    albumfs("init", store)
    mp.mkdir()
    rc, err, mounted = attempt([ALBUMFS, "mount", "--store", str(store), "-f", "-o", "no_such_option", mp],
                               tmp_path, [mp])
    assert rc == 2, f"exit status {rc}"
    assert not mounted
    assert err.strip()


def test_mount_table_entry(mount):
    """Mount table: 'STORE on MOUNTPOINT type fuse.albumfs' (fsname = the store's absolute path)."""
    source, _mp, fstype, _opts = mount_entry(mount.mp)
    assert source == str(mount.store.resolve())
    assert fstype == "fuse.albumfs"


def test_daemon_command_line_names_the_store(mount):
    """Durability: the daemon's command line keeps the store's path (ps shows which library it serves)."""
    with open(f"/proc/{mount.proc.pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    assert any(os.fsencode(str(mount.store)) in a for a in argv), argv


FORMS = {
    "mount-subcommand": lambda store, mp: [ALBUMFS, "mount", "--store", store, mp],
    "mount.fuse3": lambda store, mp: [ALBUMFS, store, mp, "-o", "rw,noatime,dev,suid,exec,async"],
}


@pytest.mark.parametrize("form", list(FORMS))
def test_background_mount_is_ready_when_it_returns(tmp_path, form):
    """CLI: without -f, albumfs returns only once mounted; after unmount the daemon is gone within seconds."""
    store, mp = tmp_path / "store", tmp_path / "mnt"
    albumfs("init", store)
    mp.mkdir()
    env = {} if form == "mount.fuse3" else None   # mount.fuse3 runs it with no PATH or HOME
    log = tmp_path / "albumfs.log"
    try:
        with open(log, "wb") as out:
            p = subprocess.run([os.fspath(a) for a in FORMS[form](str(store), mp)], stdin=subprocess.DEVNULL,
                               stdout=out, stderr=out, env=env, timeout=30)
        assert p.returncode == 0, f"exit {p.returncode}: {log.read_text(errors='replace')}"
        assert is_mounted(mp), "albumfs returned before the mount was ready"
        assert {"Albums", "Camera Roll"} <= set(names(mp))
        write(mp / "Camera Roll" / "x.jpg", b"x")
        assert read(mp / "Camera Roll" / "x.jpg") == b"x"
        daemons = pids_mentioning(str(store))
        assert daemons, "no process shows the store's path in its command line"
    finally:
        left = stop_background_mount(mp, store)
    assert not left, f"daemon {left} still running 10 s after unmount"


def test_read_only_mount(mount):
    """Options: -o ro mounts read-only: reads work, every change → EROFS."""
    os.mkdir(mount.albums / "A")
    write(mount.albums / "A" / "x.jpg", b"x")
    mount.remount(["ro"])
    assert read(mount.albums / "A" / "x.jpg") == b"x"
    expect_errno(errno.EROFS, create, mount.roll / "new.jpg")
    expect_errno(errno.EROFS, open, mount.roll / "x.jpg", "r+b")
    expect_errno(errno.EROFS, os.mkdir, mount.albums / "B")
    expect_errno(errno.EROFS, os.unlink, mount.roll / "x.jpg")
    expect_errno(errno.EROFS, os.setxattr, mount.roll / "x.jpg", "user.k", b"v")
    assert os.statvfs(mount.mp).f_flag & os.ST_RDONLY


def test_help_and_version():
    """CLI: albumfs --help and --version exit 0 and print something."""
    for flag in ("--help", "--version"):
        p = run([ALBUMFS, flag], check=False, timeout=30)
        assert p.returncode == 0, (flag, p.returncode, p.stderr)
        assert (p.stdout + p.stderr).strip()


INSTALLED = "/usr/local/bin/albumfs"


def test_mount_t_fuse_albumfs(tmp_path):
    """SEMANTICS: `mount -t fuse.albumfs STORE MP -o …` works through mount.fuse3, which runs the
    installed binary with no PATH or HOME and adds generic options (rw, dev, suid, …)."""
    if os.path.lexists(INSTALLED) and os.path.realpath(INSTALLED) != os.path.realpath(ALBUMFS):
        pytest.fail(f"{INSTALLED} is another albumfs than the one under test ({ALBUMFS}); "
                    "remove it or point it at the build")
    placed = not os.path.lexists(INSTALLED)
    if placed:
        os.symlink(ALBUMFS, INSTALLED)
    store, mp = tmp_path / "store", tmp_path / "mnt"
    mp.mkdir()
    albumfs("init", store)
    try:
        p = run(["mount", "-t", "fuse.albumfs", store, mp, "-o", "noatime,nodiratime,lazytime,nosuid"],
                check=False, timeout=30)
        assert p.returncode == 0, p.stderr
        entry = mount_entry(mp)
        assert entry is not None and entry[0] == str(store) and entry[2] == "fuse.albumfs"
        # mount.fuse3 passes dev,suid: every mount is nosuid,nodev all the same.
        assert {"nosuid", "nodev"} <= set(entry[3].split(",")), entry[3]
        write(mp / "Camera Roll" / "x.jpg", b"x")
        assert read(mp / "Camera Roll" / "x.jpg") == b"x"
        left = stop_background_mount(mp, store)
        assert not left, f"daemon {left} still running 10 s after unmount"
        # An unknown option is refused through mount.fuse3 too (the store is free again, so only
        # the option can be the reason), and nothing is left mounted.
        status, output, mounted = attempt(["mount", "-t", "fuse.albumfs", store, mp, "-o", "no_such_option"],
                                          tmp_path, [mp])
        assert status != 0 and not mounted, output
        assert b"no_such_option" in output, output
    finally:
        stop_background_mount(mp, store)
        if placed:
            os.unlink(INSTALLED)


# --- SEMANTICS.md § Durability and safety: stores are created only on purpose ---------------

NAMED_FORMS = {
    "mount -f": lambda store, mp: [ALBUMFS, "mount", "--store", store, "-f", mp],
    "mount": lambda store, mp: [ALBUMFS, "mount", "--store", store, mp],
    "mount.fuse3": lambda store, mp: [ALBUMFS, store, mp, "-o", "rw,noatime,dev,suid"],
}


@pytest.mark.parametrize("form", list(NAMED_FORMS))
@pytest.mark.parametrize("how", ["missing", "empty-dir"])
def test_named_store_that_is_not_there_is_refused(tmp_path, how, form):
    """SEMANTICS.md § Durability and safety: a named store that does not exist, or an empty
    directory that holds no store, is refused with exit 3 and one line (a typo or an unplugged
    disk never mounts an empty library), and the path is left exactly as it was."""
    store, mp = tmp_path / "disk" / "photos", tmp_path / "mnt"
    mp.mkdir()
    if how == "empty-dir":
        store.mkdir(parents=True)
    rc, out, mounted = attempt(NAMED_FORMS[form](store, mp), tmp_path, [mp])
    assert not mounted, f"a {how} store was mounted"
    assert rc == 3, f"exit status {rc}: {out!r}"
    lines = out.decode(errors="replace").strip().splitlines()
    assert len(lines) == 1 and "albumfs init" in lines[0], lines
    if how == "missing":
        assert not (tmp_path / "disk").exists(), "the refused store's path was created"
    else:
        assert os.listdir(store) == [], "the refused empty directory was written into"


def test_init_and_mount_create_make_a_store_on_purpose(tmp_path):
    """SEMANTICS.md § Durability and safety: `albumfs init DIR` and `albumfs mount --create` create
    a store (private, 0700); init on a store leaves it as it is."""
    store, mp = tmp_path / "made" / "store", tmp_path / "mnt"
    mp.mkdir()
    p = albumfs("init", store, text=True)
    assert os.stat(store).st_mode & 0o777 == 0o700 and (store / "library.sqlite").exists(), p.stdout
    assert albumfs("init", store, text=True).returncode == 0
    other = tmp_path / "other"
    try:
        albumfs("mount", "--create", "--store", other, mp, timeout=30)
        assert is_mounted(mp)
        write(mp / "Camera Roll" / "x.jpg", b"x")
    finally:
        left = stop_background_mount(mp, other)
    assert not left, f"daemon {left} still running after unmount"
    assert os.stat(other).st_mode & 0o777 == 0o700


def test_default_store_is_still_created_on_first_use(tmp_path):
    """SEMANTICS.md § Durability and safety: the default store (no --store) is created on first use."""
    mp, data = tmp_path / "mnt", tmp_path / "data"
    mp.mkdir()
    env = dict(os.environ, XDG_DATA_HOME=str(data))
    store = data / "albumfs"
    try:
        p = run([ALBUMFS, "mount", mp], env=env, check=False, timeout=30)
        assert p.returncode == 0, p.stderr
        assert (store / "library.sqlite").exists()
    finally:
        left = stop_background_mount(mp, store)
    assert not left


def test_unmount_returns_once_the_daemon_released_the_store(tmp_path):
    """SEMANTICS.md § Durability and safety: `albumfs unmount` returns only once the store is free
    again: an fsck right after it never finds the store mounted."""
    store, mp = tmp_path / "store", tmp_path / "mnt"
    mp.mkdir()
    albumfs("init", store)
    try:
        for i in range(10):
            albumfs("mount", "--store", store, mp, timeout=30)
            write(mp / "Camera Roll" / f"{i}.jpg", b"x" * 1000)
            albumfs("unmount", mp, timeout=30)
            p = albumfs("fsck", "--store", store, check=False, text=True)
            assert p.returncode == 0 and "mounted" not in p.stdout + p.stderr, \
                f"round {i}: fsck right after unmount: exit {p.returncode}: {p.stdout} {p.stderr}"
    finally:
        left = stop_background_mount(mp, store)
    assert not left


def test_background_mount_failure_says_why(tmp_path):
    """SEMANTICS.md § Durability and safety: without -f, a failed mount's one line gives the reason
    libfuse or fusermount3 gave, and the fix. Tried as an ordinary user with -o allow_other: no
    access to /dev/fuse (this machine's /dev/fuse may be root's only), or else allow_other without
    user_allow_other in /etc/fuse.conf. Everything uid 1000 touches is the test's own: a copy of
    the binary, the store and the mount point under 0755 directories in /tmp. (The checkout may be
    under a directory uid 1000 cannot enter; the daemon, which runs the binary again, then failed
    with "cannot start the daemon: Permission denied" instead of the reason.)"""
    if os.geteuid() != 0:
        pytest.fail("this test switches to uid 1000 and needs root")
    user = 1000
    fuse = os.stat("/dev/fuse")
    device_open = fuse.st_mode & 0o006 == 0o006 or (fuse.st_uid == user and fuse.st_mode & 0o600 == 0o600)
    conf = open("/etc/fuse.conf").read() if os.path.exists("/etc/fuse.conf") else ""
    allowed = any(l.strip() == "user_allow_other" for l in conf.splitlines())
    if device_open and allowed:
        pytest.fail("this machine lets uid 1000 mount with allow_other: nothing to refuse")
    binary = public_albumfs()
    with public_tmpdir() as pub:
        store, mp = pub / "store", pub / "mnt"
        for d in (mp, store):
            d.mkdir()
            os.chown(d, user, user)
        made = as_user([binary, "init", store], uid=user, gid=user)
        assert made.returncode == 0, made.stderr
        try:
            p = as_user([binary, "mount", "--store", store, "-o", "allow_other", mp], uid=user, gid=user)
        finally:
            stop_background_mount(mp, store)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 4 and len(lines) == 1, (p.returncode, p.stderr)
        if not device_open:
            assert "/dev/fuse" in lines[0] and "Permission denied" in lines[0], lines[0]
            assert "/dev/fuse" in lines[0].split("(fix: ")[-1], f"no fix given: {lines[0]}"
        else:
            assert "user_allow_other" in lines[0].split("(fix: ")[-1], f"no fix given: {lines[0]}"


def test_every_mount_has_a_connection_watcher_that_ends_with_it(mount_factory, tmp_path):
    """docs/DESIGN.md, "A killed daemon": the daemon's child `albumfs watch-connection PID N`
    watches this mount's own FUSE connection (N read from mountinfo, here for a mount point
    whose name has a space and a backslash), holds no descriptor of the daemon's (/dev/fuse
    would keep a dead daemon's connection alive), and exits once the daemon has. (That it frees
    a daemon SIGKILL cannot end is test_crash.py's: it fails when a killed daemon lives 5 s.)"""
    m = mount_factory("w", mp=tmp_path / "w" / "mount point \\ here")
    # -f: the mount point is in the mount table before the daemon has finished starting; a
    # request served means it has (its loop starts after the watcher).
    os.stat(m.mp)
    watchers = daemon_children(m.proc.pid, b"watch-connection")
    assert len(watchers) == 1, watchers
    pid, argv = watchers[0]
    abort_file = m.abort_file
    assert abort_file, "fusectl is not mounted here: the watcher could not do its work"
    connection = abort_file.split("/")[-2]
    assert argv[2:4] == [str(m.proc.pid).encode(), connection.encode()], argv
    # /dev/fuse, never: the daemon's is close-on-exec. Anything else it has comes from its own
    # start-up (the loader's libraries, the inherited descriptors it closes first) and goes:
    # only that is waited for, and one it keeps fails this after 30 s (room for a start-up on a
    # loaded machine: a correct watcher is done in milliseconds, and the loop ends then).
    deadline = time.monotonic() + 30
    while True:
        held = {}
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(FileNotFoundError):   # closed meanwhile
                held[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
        assert "/dev/fuse" not in held.values(), held
        if set(held) <= {"0", "1", "2"}:
            break
        assert time.monotonic() < deadline, held
        time.sleep(0.05)
    assert os.readlink(f"/proc/{pid}/cwd") == "/"
    m.unmount()
    # Eventual by design: the watcher looks twice a second whether its parent is gone.
    deadline = time.monotonic() + 10
    while process_state(pid) not in (None, "Z"):
        assert time.monotonic() < deadline, "the watcher outlived its daemon by 10 s"
        time.sleep(0.1)
