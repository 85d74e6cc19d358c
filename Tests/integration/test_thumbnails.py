"""SEMANTICS.md § Thumbnails: browsing costs no download. A listing of a directory puts each
photo's thumbnail in the mounting user's freedesktop thumbnail cache, named and marked as GLib
and Nautilus look for it. Checked with GLib itself (`gio info`: thumbnail::path and
thumbnail::is-valid, so the URI escaping and the text chunks are GLib's own verdict), and with a
real Nautilus under Xvfb showing an album of 200 photos whose originals are only in the bucket:
the picture on the screen is the photos', and no GET of an original reached the object store
(counted at a proxy in front of radosgw)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from albumfs_testlib import ALBUMFS, index_wait, run
from faultproxy import FaultProxy
from objectstore import running_object_store
from test_remote import SYNC_TIMEOUT, storage, sync

MAGENTA_SHADES = 200   # photos of the Nautilus test, each its own content


def photo(path: Path, colour: str = "magenta", size: str = "640x480") -> bytes:
    """A real JPEG made by ImageMagick: one colour, with a black block in the top-left corner."""
    run(["convert", "-size", size, f"xc:{colour}", "-fill", "black", "-draw", "rectangle 0,0 63,47", path])
    return path.read_bytes()


def variant(jpeg: bytes, n: int) -> bytes:
    """The same picture as another file: a JPEG comment (COM segment) after SOI saying `n`."""
    text = f"albumfs test photo {n}".encode()
    return jpeg[:2] + b"\xff\xfe" + (len(text) + 2).to_bytes(2, "big") + text + jpeg[2:]


def gio_thumbnail(path: Path, cache_home: Path) -> dict[str, str]:
    """thumbnail::* of `path` as GLib computes it for a user whose cache is `cache_home`."""
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": str(cache_home.parent),
           "XDG_CACHE_HOME": str(cache_home), "GIO_USE_VFS": "local"}
    out = run(["gio", "info", "-a", "thumbnail::*", path], env=env, text=True).stdout
    found = {}
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("thumbnail::"):
            key, _, value = line.partition(": ")
            found[key.removeprefix("thumbnail::")] = value
    return found


def written_by(png: Path) -> str | None:
    """The Software text chunk of a thumbnail (albumfs writes `albumfs`; GNOME's factory its own)."""
    data = png.read_bytes()
    at = 8
    while at + 8 <= len(data):
        length = int.from_bytes(data[at:at + 4], "big")
        kind = data[at + 4:at + 8]
        if kind == b"IDAT":
            break
        if kind == b"tEXt":
            key, _, value = data[at + 8:at + 8 + length].partition(b"\0")
            if key == b"Software":
                return value.decode()
        at += 12 + length
    return None


@pytest.mark.skipif(shutil.which("gio") is None, reason="gio is not installed (scripts/test installs libglib2.0-bin)")
def test_gio_finds_a_valid_thumbnail_for_each_path_of_a_photo_once_its_directory_is_listed(mount, tmp_path):
    """A photo with a name GLib must escape (space, #, %, é, ;) in the roll and an album: before
    any listing GLib finds no thumbnail; after `ls` of each directory it finds one for that path,
    valid by GLib's own check (Thumb::URI and Thumb::MTime), a PNG of at most 256 px written by
    albumfs. After `touch` (a new mtime) it is not valid, until the next listing that reaches the
    daemon (after a remount) writes it anew."""
    cache = mount.thumbnail_home
    name = "Été #1 50%; ok.jpg"
    data = photo(tmp_path / "p.jpg", size="800x600")
    (mount.roll / name).write_bytes(data)
    (mount.albums / "Trip").mkdir()
    os.link(mount.roll / name, mount.albums / "Trip" / name)
    index_wait(mount.mp)
    paths = [mount.roll / name, mount.albums / "Trip" / name]
    for path in paths:
        assert gio_thumbnail(path, cache).get("path") is None, "a thumbnail before any listing"

    for path in paths:
        os.listdir(path.parent)
        found = gio_thumbnail(path, cache)
        assert found.get("is-valid") == "TRUE", (path, found)
        png = Path(found["path"])
        assert png.parent == cache / "thumbnails" / "large"
        assert written_by(png) == "albumfs"
        size = run(["identify", "-format", "%w %h", png], text=True).stdout.split()
        assert max(map(int, size)) == 256 and png.stat().st_mode & 0o777 == 0o600, size
    # One file a path.
    assert len(list((cache / "thumbnails" / "large").iterdir())) == 2

    # A new mtime: the thumbnail is not valid for it (a file manager would draw its own from the
    # file); the next listing the kernel asks the daemon for (its listing cache dropped: here a
    # remount) writes it anew.
    os.utime(mount.roll / name, (time.time() + 100, time.time() + 100))
    assert gio_thumbnail(paths[0], cache).get("is-valid") == "FALSE", "valid although the photo changed"
    mount.remount()
    os.listdir(mount.roll)
    assert gio_thumbnail(paths[0], cache).get("is-valid") == "TRUE"


@pytest.mark.skipif(shutil.which("gio") is None, reason="gio is not installed (scripts/test installs libglib2.0-bin)")
def test_nothumbnails_writes_none(mount_factory, tmp_path):
    """-o nothumbnails: a listing puts nothing in the cache."""
    m = mount_factory("off", start=False)
    m.start(["nothumbnails"])
    (m.roll / "a.jpg").write_bytes(photo(tmp_path / "a.jpg"))
    index_wait(m.mp)
    os.listdir(m.roll)
    assert gio_thumbnail(m.roll / "a.jpg", m.thumbnail_home).get("path") is None
    assert not (m.thumbnail_home / "thumbnails").exists()


def test_thumbnail_space_bounds_what_a_mount_writes(mount_factory, tmp_path):
    """SEMANTICS.md § Thumbnails, Bounded: -o thumbnail_space=SIZE is the most a mount writes
    into the cache, each file in whole 4 KiB blocks; past it a listing writes no more, the log
    says so once, and what was written is the photos' own. Each thumbnail file's mtime is when
    it was written (GNOME's housekeeping ages them by it), not its photo's."""
    m = mount_factory("bounded", start=False)
    m.start(["thumbnail_space=8K"])
    data = photo(tmp_path / "p.jpg", size="800x600")
    for i in range(4):
        (m.roll / f"p{i}.jpg").write_bytes(variant(data, i))
    os.utime(m.roll / "p0.jpg", (1_420_070_400, 1_420_070_400))   # taken in 2015
    index_wait(m.mp)
    os.listdir(m.roll)
    large = m.thumbnail_home / "thumbnails" / "large"
    written = sorted(large.iterdir())
    sizes = [(p.stat().st_size + 4095) // 4096 for p in written]
    assert 1 <= len(written) < 4 and sum(sizes) <= 2, (written, sizes)
    assert all(written_by(p) == "albumfs" and abs(p.stat().st_mtime - time.time()) < 3600 for p in written)
    log = (m.base / "albumfs.log").read_text()
    assert log.count("has written its 8 KiB of thumbnails (-o thumbnail_space=SIZE)") == 1, log
    m.unmount()
    # A size it cannot read is a usage error, naming the option.
    done = subprocess.run([ALBUMFS, "mount", "--store", m.store, m.mp, "-o", "thumbnail_space=lots"],
                          capture_output=True, text=True, timeout=30)
    if done.returncode == 0:   # mounted after all: never left behind
        subprocess.run(["fusermount3", "-u", m.mp], timeout=30)
    assert done.returncode != 0 and "thumbnail_space" in done.stderr, done


# --- Nautilus --------------------------------------------------------------------------------------

NAUTILUS_TOOLS = ["nautilus", "Xvfb", "xdpyinfo", "import", "dbus-run-session"]


@pytest.fixture(scope="module")
def gateway():
    with running_object_store() as store:
        yield store


class Desktop:
    """Xvfb and, in a D-Bus session of its own (its own process session too, all killed at the
    end), Nautilus showing one folder; HOME and XDG_CACHE_HOME as given."""

    def __init__(self, home: Path, cache_home: Path, shots: Path):
        self.home, self.cache_home, self.shots = home, cache_home, shots
        self.display = f":{70 + os.getpid() % 20}"
        self.procs: list[subprocess.Popen] = []

    def __enter__(self):
        xvfb = subprocess.Popen(["Xvfb", self.display, "-screen", "0", "1280x1000x24", "-nolisten", "tcp"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        self.procs.append(xvfb)
        deadline = time.monotonic() + 30
        while subprocess.run(["xdpyinfo", "-display", self.display], capture_output=True).returncode != 0:
            assert xvfb.poll() is None, "Xvfb exited"
            assert time.monotonic() < deadline, "Xvfb did not answer within 30 s"
            time.sleep(0.2)
        return self

    def open(self, folder: Path) -> None:
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C.UTF-8", "DISPLAY": self.display,
               "HOME": str(self.home), "XDG_CACHE_HOME": str(self.cache_home),
               "XDG_DATA_HOME": str(self.home / "data"), "XDG_CONFIG_HOME": str(self.home / "config"),
               "GIO_USE_VOLUME_MONITOR": "unix", "NO_AT_BRIDGE": "1", "GSETTINGS_BACKEND": "memory",
               # GTK 4 draws with cairo: on Xvfb its GL renderer is Mesa's llvmpipe, whose frames of
               # the "Loading…" spinner took both cores and kept the main loop from ever starting the
               # folder's listing (a gdb backtrace of a run that stalled 120 s: every thread of it
               # in swrast_dri.so under gsk_renderer_render; 2 of 3 full suites).
               "GSK_RENDERER": "cairo"}
        # A session bus that starts no service: no Tracker, GVfs, portal or keyring, which a
        # user's session may or may not run, and whose start-up raced Nautilus' first listing
        # (now and then it never came). GIO reads local files itself (GIO_USE_VFS=local).
        bus = self.home / "session-bus.conf"
        bus.write_text("""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:tmpdir=/tmp</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy>
</busconfig>
""")
        env["GIO_USE_VFS"] = "local"
        log = open(self.shots / "nautilus.log", "w")
        self.procs.append(subprocess.Popen(
            ["dbus-run-session", f"--config-file={bus}", "--", "nautilus", "--new-window", str(folder)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True))

    def screenshot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        run(["import", "-display", self.display, "-window", "root", path])
        return path

    def state(self) -> str:
        """What every process of the desktop is doing (for a failure's message): each thread's
        kernel wait channel, which names a FUSE request that never came back."""
        lines = []
        for p in self.procs:
            sid = os.getsid(p.pid) if p.poll() is None else None
            for proc in Path("/proc").iterdir():
                try:
                    if not proc.name.isdigit() or os.getsid(int(proc.name)) != sid:
                        continue
                    comm = (proc / "comm").read_text().strip()
                    waits = sorted({(t / "wchan").read_text() for t in (proc / "task").iterdir()})
                    lines.append(f"{proc.name} {comm}: {', '.join(waits)}")
                except (OSError, ProcessLookupError):
                    continue
        return "; ".join(lines)

    def __exit__(self, *exc):
        for p in reversed(self.procs):
            subprocess.run(["pkill", "-KILL", "-s", str(p.pid)], stdin=subprocess.DEVNULL, timeout=30)
            if p.poll() is None:
                p.kill()
            p.wait(timeout=30)


def magenta_pixels(png: Path) -> int:
    """Pixels of the screenshot within 20 % of magenta (no GTK theme icon has that colour)."""
    out = run(["convert", png, "-fuzz", "20%", "-fill", "black", "+opaque", "#FF00FF",
               "-fill", "white", "-opaque", "#FF00FF", "-colorspace", "Gray", "-format", "%[fx:mean*w*h]", "info:"],
              text=True).stdout
    return int(float(out))


@pytest.mark.skipif(any(shutil.which(t) is None for t in NAUTILUS_TOOLS),
                    reason="Nautilus under Xvfb needs nautilus, xvfb, x11-utils, imagemagick, dbus (scripts/test installs them)")
@pytest.mark.mount_timeout(300)
def test_nautilus_shows_an_album_of_remote_only_photos_with_no_get_of_an_original(gateway, mount_factory, tmp_path):
    """200 photos (real JPEGs, magenta with a black corner) copied into an album of a store whose
    remote is radosgw behind a proxy that counts requests; facts read, uploaded (sync --wait),
    remounted with -o cache_size=0 until every one is only in the bucket. Then Nautilus, with the
    daemon's thumbnail cache as its own, opens the album: within the bound its window shows the
    photos' magenta (thumbnails, not icons), no GET of an object reached the proxy, every photo is
    still only in the bucket, and every thumbnail in the cache is albumfs's (Nautilus made none)."""
    with FaultProxy(gateway.host, gateway.port) as proxy:
        keys = {"AWS_ACCESS_KEY_ID": gateway.access_key, "AWS_SECRET_ACCESS_KEY": gateway.secret_key}
        bucket = "t" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:12]
        store = tmp_path / "m" / "store"
        store.parent.mkdir(parents=True)
        run([ALBUMFS, "init", "--remote", f"s3://{bucket}/lib", "--endpoint", proxy.endpoint, store],
            env={**os.environ, **keys})
        m = mount_factory("m", store=store, env=keys)
        m.gateway, m.bucket = gateway, bucket
        album = m.albums / "Trip"
        album.mkdir()
        base = photo(tmp_path / "base.jpg")
        for n in range(MAGENTA_SHADES):
            (album / f"IMG_{n:04d}.JPG").write_bytes(variant(base, n))
        index_wait(m.mp)
        sync(m)
        m.unmount()
        m.start(["cache_size=0"])
        deadline = time.monotonic() + SYNC_TIMEOUT
        while any(storage(album / f"IMG_{n:04d}.JPG") != "remote" for n in range(MAGENTA_SHADES)):
            assert time.monotonic() < deadline, "not every photo was evicted with cache_size=0"
            time.sleep(0.2)
        gets_before = proxy.count("GET", path_contains="/lib/objects/")

        shots = tmp_path / "shots"
        shots.mkdir()
        home = tmp_path / "home"
        home.mkdir()
        with Desktop(home, m.thumbnail_home, shots) as desktop:
            desktop.open(album)
            # Eventual (a GUI draws when it draws), bounded: Nautilus has listed the whole album
            # (a thumbnail of each in the cache), its window shows at least 12 thumbnails' worth
            # of magenta (each is some 96 × 72 px at its default zoom), and it is done: two
            # screenshots a second apart are the same picture ("Loading…" gone).
            large = m.thumbnail_home / "thumbnails" / "large"
            deadline = time.monotonic() + 120
            previous = None
            while True:
                shot = desktop.screenshot("nautilus")
                shown = magenta_pixels(shot)
                picture = run(["identify", "-format", "%#", shot], text=True).stdout
                listed = len(list(large.glob("*.png"))) if large.is_dir() else 0
                if shown >= 12 * 60 * 45 and listed >= MAGENTA_SHADES and picture == previous:
                    break
                previous = picture
                if time.monotonic() >= deadline:
                    cache = sorted(str(f.relative_to(m.thumbnail_home)) for f in m.thumbnail_home.rglob("*"))
                    lister = subprocess.run(["timeout", "20", "ls", "-l", album], capture_output=True, text=True)
                    pytest.fail(f"after 120 s Nautilus shows {shown} magenta pixels, {listed} thumbnails are in the cache"
                                f" (screenshot {shot}, log {shots / 'nautilus.log'}); the cache holds {len(cache)}:"
                                f" {cache[:5]}; ls -l of the album: exit {lister.returncode}, {len(lister.stdout.splitlines())}"
                                f" lines; the desktop's processes wait in: {desktop.state()}")
                time.sleep(1)
            gets = proxy.count("GET", path_contains="/lib/objects/") - gets_before
            assert gets == 0, f"Nautilus' thumbnails cost {gets} GETs of originals"
        assert {storage(album / f"IMG_{n:04d}.JPG") for n in range(MAGENTA_SHADES)} == {"remote"}
        cached = list((m.thumbnail_home / "thumbnails").rglob("*.png"))
        assert len(cached) >= MAGENTA_SHADES
        assert {written_by(png) for png in cached} == {"albumfs"}, "Nautilus made thumbnails of its own"
        m.unmount()
