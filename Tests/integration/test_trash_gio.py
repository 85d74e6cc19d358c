"""The file manager's trash through GIO, as Nautilus uses it: SEMANTICS.md § Recently Deleted,
and the file manager's trash. `gio trash`, `--list`, `--restore` and `--empty` (GLib's gio tool
with GVfs's trash backend) run in their own D-Bus session, as root on root's mount and as a
normal user on that user's own mount (where the daemon gets no FUSE passthrough)."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import urllib.parse
from pathlib import Path

import pytest

from albumfs_testlib import NOBODY, content_usage, payload, public_tmpdir

pytestmark = pytest.mark.skipif(shutil.which("gio") is None or shutil.which("dbus-run-session") is None
                                or not os.path.exists("/usr/libexec/gvfsd-trash"),
                                reason="gio, dbus-run-session or GVfs's trash backend is not installed "
                                       "(scripts/test installs libglib2.0-bin gvfs dbus)")


def normal_user() -> int:
    """A normal user: the first one with a home in /etc/passwd, else nobody."""
    for entry in pwd.getpwall():
        if 1000 <= entry.pw_uid < 60000:
            return entry.pw_uid
    return NOBODY


class Gio:
    """Runs gio as `uid` in a D-Bus session of its own, with its own HOME (on another device than
    the mount, so GIO uses the mount's .Trash-UID); every process of the session is killed after."""

    def __init__(self, home: Path, uid: int | None):
        self.home = home
        self.uid = uid
        home.mkdir(parents=True, exist_ok=True)
        if uid is not None:
            os.chown(home, uid, uid)

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = ["dbus-run-session", "--", "gio", *args]
        if self.uid is not None:
            cmd = ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", *cmd]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": str(self.home),
               "XDG_DATA_HOME": str(self.home / "data"), "GIO_USE_VOLUME_MONITOR": "unix"}
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env, start_new_session=True)
        try:
            out, err = p.communicate(timeout=60)
        finally:
            # gvfsd and its backends outlive the session's bus: end the whole session.
            subprocess.run(["pkill", "-KILL", "-s", str(p.pid)], stdin=subprocess.DEVNULL, timeout=30)
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        result = subprocess.CompletedProcess(cmd, p.returncode, out, err)
        if check and p.returncode != 0:
            raise AssertionError(f"gio {' '.join(args)}: exit {p.returncode}\n{out}\n{err}")
        return result

    def listing(self) -> dict[str, str]:
        """gio trash --list: original path -> trash URI."""
        out = self("trash", "--list").stdout
        items = {}
        for line in out.splitlines():
            uri, original = line.split("\t", 1)
            items[original] = uri
        return items


@pytest.fixture(params=["root", "user"])
def library(request, mount_factory):
    """(mount, gio) as root on root's mount, or as a normal user on that user's own mount."""
    with public_tmpdir() as pub:
        uid = None if request.param == "root" else normal_user()
        if uid is not None and os.geteuid() != 0:
            pytest.skip("a mount as another user needs root to set it up")
        m = mount_factory("m", base=pub / "m", uid=uid)
        yield m, Gio(pub / "home", uid), Actor(uid)
        m.unmount()


class Actor:
    """File operations on the mount as its owner (a user's own mount admits nobody else, root
    included): through small commands run as that uid."""

    def __init__(self, uid: int | None):
        self.uid = uid

    def attempt(self, *cmd, data: bytes | None = None) -> subprocess.CompletedProcess:
        cmd = [os.fspath(c) for c in cmd]
        if self.uid is not None:
            cmd = ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", *cmd]
        return subprocess.run(cmd, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)

    def run(self, *cmd, data: bytes | None = None) -> bytes:
        p = self.attempt(*cmd, data=data)
        if p.returncode != 0:
            raise AssertionError(f"{p.args}: exit {p.returncode}: {p.stderr.decode(errors='replace')}")
        return p.stdout

    def mkdir(self, path: Path) -> None:
        self.run("mkdir", path)

    def write(self, path: Path, data: bytes) -> None:
        self.run("sh", "-c", 'cat > "$1"', "sh", path, data=data)

    def read(self, path: Path) -> bytes:
        return self.run("cat", path)

    def ino(self, path: Path) -> int:
        return int(self.run("stat", "-c", "%i", path))

    def nlink(self, path: Path) -> int:
        return int(self.run("stat", "-c", "%h", path))

    def names(self, path: Path) -> list[str]:
        return sorted(self.run("ls", "-A1", path).decode().splitlines())

    def exists(self, path: Path) -> bool:
        return self.attempt("stat", path).returncode == 0

    def rm(self, path: Path) -> None:
        self.run("rm", path)


def test_gio_trash_list_restore_empty(library):
    """Trash from the roll (deletes to Recently Deleted), from an album (that reference only) and a
    whole album; --list shows each with its original path; --restore puts each back exactly, albums
    included; a second trash of one name gets GIO's second name and both restore; --empty purges
    only assets deleted from the roll, never an asset still in the roll."""
    m, gio, user = library
    trip, day = m.albums / "Trip", m.albums / "Trip" / "Day 1"
    a = m.albums / "A"
    for d in (trip, day, a):
        user.mkdir(d)
    user.write(a / "roll.jpg", payload(40_000, "roll"))
    user.write(a / "ref.jpg", payload(30_000, "ref"))
    user.write(day / "deep.jpg", payload(20_000, "deep"))
    user.write(trip / "ref.jpg", payload(10_000, "second ref"))
    roll_ino, ref_ino, deep_ino = user.ino(a / "roll.jpg"), user.ino(a / "ref.jpg"), user.ino(day / "deep.jpg")
    second_ref_ino = user.ino(trip / "ref.jpg")

    gio("trash", str(m.roll / "roll.jpg"), str(a / "ref.jpg"))
    gio("trash", str(trip / "ref.jpg"))
    gio("trash", str(trip))
    assert user.names(m.roll) == ["deep.jpg", "ref (2).jpg", "ref.jpg"]
    assert user.names(a) == [] and user.names(m.albums) == ["A"]
    assert user.ino(m.mp / "Recently Deleted" / "roll.jpg") == roll_ino
    assert user.nlink(m.roll / "deep.jpg") == 1, "the trashed album's entries count as no link"
    listing = gio.listing()
    mp = str(m.mp)
    assert set(listing) == {f"{mp}/Camera Roll/roll.jpg", f"{mp}/Albums/A/ref.jpg", f"{mp}/Albums/Trip/ref.jpg",
                            f"{mp}/Albums/Trip"}, listing
    second = urllib.parse.unquote(listing[f"{mp}/Albums/Trip/ref.jpg"]).replace("\\", "/")
    assert second.endswith("/files/ref.2.jpg"), f"GIO's second name for a name in the trash: {second}"

    for original in (f"{mp}/Camera Roll/roll.jpg", f"{mp}/Albums/A/ref.jpg", f"{mp}/Albums/Trip"):
        gio("trash", "--restore", listing[original])
    gio("trash", "--restore", listing[f"{mp}/Albums/Trip/ref.jpg"])
    assert gio.listing() == {}
    assert user.ino(a / "roll.jpg") == user.ino(m.roll / "roll.jpg") == roll_ino, "restored with its album"
    assert user.ino(a / "ref.jpg") == ref_ino
    assert user.ino(day / "deep.jpg") == deep_ino and user.ino(trip / "ref.jpg") == second_ref_ino
    assert user.names(m.mp / "Recently Deleted") == []
    assert user.nlink(m.roll / "deep.jpg") == 2

    # Empty Trash: only what was deleted from the roll is purged.
    gio("trash", str(m.roll / "roll.jpg"), str(a / "ref.jpg"), str(trip))
    before = content_usage(m.store)[0]
    gio("trash", "--empty")
    assert gio.listing() == {}
    assert user.names(m.mp / "Recently Deleted") == []
    assert not user.exists(m.roll / "roll.jpg")
    assert user.read(m.roll / "ref.jpg") == payload(30_000, "ref"), "an asset in the roll is never deleted"
    assert user.ino(m.roll / "deep.jpg") == deep_ino and user.nlink(m.roll / "deep.jpg") == 1
    assert user.names(m.albums) == ["A"] and user.names(a) == []
    assert content_usage(m.store)[0] == before - 4, "the purged asset's data and the three .trashinfo files are freed"


def test_rm_shows_in_the_file_managers_trash(library):
    """An asset deleted with rm is listed by the Trash window (albumfs writes its .trashinfo in
    the deleter's trash), and its Restore brings it back with its albums."""
    m, gio, user = library
    a = m.albums / "A"
    user.mkdir(a)
    user.write(a / "p.jpg", b"photo")
    p = user.ino(a / "p.jpg")
    user.rm(m.roll / "p.jpg")
    listing = gio.listing()
    assert list(listing) == [f"{m.mp}/Camera Roll/p.jpg"], listing
    gio("trash", "--restore", listing[f"{m.mp}/Camera Roll/p.jpg"])
    assert user.ino(m.roll / "p.jpg") == user.ino(a / "p.jpg") == p
