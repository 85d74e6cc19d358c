"""`albumfs import` (issue 12, test item 6) on real mounts: a tree of 500 photos made with
ImageMagick (one JPEG, then distinct bytes appended after its EOI marker, so each file has its
own SHA-256 and stays a JPEG for libmagic), a video made with ffmpeg, a few files that are not
photos, some duplicates of assets already in the library and of each other.

Facts are computed by the daemon after close(): the tests wait for them with `albumfs index
--wait` (bounded); nothing else waits."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from albumfs_testlib import ALBUMFS, index_wait, ino, is_mounted, mount_entries, nlink, run, sha256

SUMMARY = re.compile(r"(\d+) imported \([\d.]+ MiB\), (\d+) duplicates? skipped, "
                     r"(\d+) other files? skipped \(not photos or videos\), (\d+) failed")


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """src/ with 500 distinct JPEGs in DCIM/100APPLE, DCIM/101APPLE (the same names, other
    contents) and Archive/2019/trip, a video, an in-tree duplicate, 3 files that are not photos
    (one a JPEG named .THM, a camera's video thumbnail) and a hidden .thumbnails/ directory.
    Returns (src, {relative path: sha256} of the photos and videos, [relative in-tree duplicates])."""
    base = tmp_path_factory.mktemp("photos")
    src = base / "src"
    jpeg = base / "one.jpg"
    run(["convert", "-size", "32x24", "xc:#3070b0", "-quality", "60", jpeg])
    data = jpeg.read_bytes()
    assert data.endswith(b"\xff\xd9")
    media: dict[str, str] = {}
    layout = [("DCIM/100APPLE", "IMG_{:04d}.JPG", 200), ("DCIM/101APPLE", "IMG_{:04d}.JPG", 200),
              ("Archive/2019/trip", "trip {:03d}.jpeg", 100)]
    n = 0
    for directory, pattern, count in layout:
        (src / directory).mkdir(parents=True)
        for i in range(count):
            rel = f"{directory}/{pattern.format(i)}"
            body = data + f"albumfs-import-test {n}\n".encode()
            (src / rel).write_bytes(body)
            os.utime(src / rel, ns=(1_500_000_000_000_000_000 + n * 1_000_000_007,) * 2)
            media[rel] = sha256(body)
            n += 1
    assert n == 500
    out = run(["file", "--brief", "--mime-type", src / "DCIM/100APPLE/IMG_0007.JPG"], text=True).stdout.strip()
    assert out == "image/jpeg", "the bytes after EOI must leave a JPEG that libmagic knows"
    run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "color=c=green:s=32x32:d=0.2",
         "-pix_fmt", "yuv420p", src / "DCIM/100APPLE/IMG_0500.MP4"])
    media["DCIM/100APPLE/IMG_0500.MP4"] = sha256(src / "DCIM/100APPLE/IMG_0500.MP4")
    # Not photos or videos: skipped and counted; a hidden directory is not entered.
    (src / "DCIM/100APPLE/IMG_0001.AAE").write_text("<?xml version='1.0'?><plist/>\n")
    (src / "Archive/notes.txt").write_text("the trip\n")
    shutil.copyfile(jpeg, src / "DCIM/100APPLE/IMG_0500.THM")
    (src / "DCIM/.thumbnails").mkdir()
    shutil.copyfile(jpeg, src / "DCIM/.thumbnails/x.jpg")
    # The same photo twice in the tree: the second is a duplicate of this run's import.
    (src / "Archive/copy").mkdir()
    shutil.copy2(src / "Archive/2019/trip/trip 007.jpeg", src / "Archive/copy/trip 007 copy.jpeg")
    return src, media, ["Archive/copy/trip 007 copy.jpeg"]


def import_(*args, check=False, env=None, timeout=120) -> tuple[subprocess.CompletedProcess, tuple[int, ...]]:
    p = run([ALBUMFS, "import", *args], check=False, text=True, timeout=timeout,
            env={**os.environ, **(env or {})})
    if check:
        assert p.returncode == 0, f"albumfs import exited {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p, summary(p.stdout)


def summary(stdout: str) -> tuple[int, ...]:
    """(imported, duplicates, other, failed) from the last line."""
    m = SUMMARY.search(stdout.strip().splitlines()[-1])
    assert m, f"no summary line in:\n{stdout[-2000:]}"
    return tuple(int(x) for x in m.groups())


def wait_for_index(mp: Path) -> dict[str, str]:
    """`albumfs index --wait` (returns when the daemon has read every closed file), then
    {roll name: sha256}: every roll entry has one by then, with no further wait."""
    index_wait(mp)
    roll = mp / "Camera Roll"
    return {name: os.getxattr(roll / name, "user.albumfs.sha256").decode() for name in os.listdir(roll)}


def imported_lines(stdout: str) -> list[tuple[str, str]]:
    """(source, destination relative to the mount) of each `imported` line."""
    return [tuple(m.groups()) for m in re.finditer(r"^imported (.*) -> (.*)$", stdout, re.M)]


def no_side_files_left(directory: Path) -> None:
    left = [n for n in os.listdir(directory) if n.startswith(".albumfs-import")]
    assert left == [], f"temporary side files left in {directory}: {left}"


def test_imports_the_new_ones_skips_duplicates_keeps_mtimes_and_a_second_run_imports_nothing(mount, photos):
    src, media, in_tree_duplicates = photos
    # 20 of them are already in the library, under other names (not yet indexed: import waits).
    already = sorted(media)[:40:2]
    for i, rel in enumerate(already):
        shutil.copyfile(src / rel, mount.roll / f"old {i}.jpg")
    before = set(os.listdir(mount.roll))

    p, counts = import_("--mount", mount.mp, src, check=True)
    new = len(media) - len(already)
    assert counts == (new, len(already) + len(in_tree_duplicates), 3, 0), p.stdout[-2000:]
    assert "hidden" not in p.stdout and ".thumbnails" not in p.stdout
    lines = imported_lines(p.stdout)
    assert len(lines) == new

    facts = wait_for_index(mount.mp)
    assert len(facts) == len(before) + new
    assert sorted(facts.values()) == sorted(set(media.values())), "every photo and video exactly once"
    for source, destination in lines:
        source_stat, copy = os.stat(source), mount.mp / destination
        assert os.stat(copy).st_mtime_ns == source_stat.st_mtime_ns, destination
        assert facts[copy.name] == media[str(Path(source).relative_to(src))]
    # The same names in two folders: the second one gets the (n) form, nothing is replaced.
    assert (mount.roll / "IMG_0003 (2).JPG").exists() and (mount.roll / "IMG_0003.JPG").exists()
    assert os.getxattr(mount.roll / "IMG_0500.MP4", "user.albumfs.kind") == b"video"
    no_side_files_left(mount.roll)

    p, counts = import_("--mount", mount.mp, src, check=True)
    assert counts == (0, len(media) + len(in_tree_duplicates), 3, 0), p.stdout[-2000:]
    assert len(os.listdir(mount.roll)) == len(facts)


def interrupt_after(cmd: list, imported: int, env=None) -> tuple[int, str]:
    """Runs cmd, sends one SIGINT once `imported` files are in (its `imported` lines), and
    returns (exit status, all of its output)."""
    proc = subprocess.Popen([os.fspath(c) for c in cmd], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, **(env or {})})
    out = []
    try:
        seen = 0
        for line in proc.stdout:
            out.append(line)
            if line.startswith("imported "):
                seen += 1
                if seen == imported:
                    proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return rc, "".join(out)


def test_ctrl_c_in_the_middle_then_a_rerun_imports_every_file_exactly_once(mount, photos):
    src, media, _ = photos
    rc, out = interrupt_after([ALBUMFS, "import", "--mount", mount.mp, src], 50)
    assert rc == 130, out[-2000:]
    last = out.strip().splitlines()[-1]
    assert last.startswith("interrupted"), last
    imported, _, _, failed = summary(out)
    assert 50 <= imported < len(media) and failed == 0, last
    no_side_files_left(mount.roll)
    assert len(os.listdir(mount.roll)) == imported

    p, counts = import_("--mount", mount.mp, src, check=True)
    assert counts[0] == len(media) - imported, p.stdout[-2000:]
    facts = wait_for_index(mount.mp)
    assert len(facts) == len(media)
    assert set(facts.values()) == set(media.values())


def test_side_files_of_killed_imports_are_removed(mount, photos):
    """A SIGKILLed import leaves its side file (never in the roll's assets): the next import
    into that directory removes it, and leaves a running import's side file alone."""
    src, _, _ = photos
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    dead = next(p for p in range(pid_max - 1, 1, -1) if not Path(f"/proc/{p}").exists())
    (mount.roll / f".albumfs-import-{dead}.tmp").write_bytes(b"half a photo")
    (mount.roll / f".albumfs-import-{os.getpid()}.tmp").write_bytes(b"being written")
    import_("--mount", mount.mp, src / "Archive/2019", check=True)
    assert sorted(n for n in os.listdir(mount.roll) if n.startswith(".")) == [f".albumfs-import-{os.getpid()}.tmp"]


def test_album_puts_them_in_the_album_and_the_roll(mount, photos):
    """--album: the new ones land in the album and the roll; the ones the library already has
    are added to the album (ln), as Photos does, under the source's name."""
    src, media, _ = photos
    trip = {rel: h for rel, h in media.items() if rel.startswith("Archive/2019/")}
    already = sorted(trip)[:10]
    for i, rel in enumerate(already):
        shutil.copyfile(src / rel, mount.roll / f"old {i}.jpg")
    p, counts = import_("--mount", mount.mp, "--album", "Trips/2019", src / "Archive/2019", check=True)
    assert counts == (len(trip) - len(already), len(already), 0, 0)
    album = mount.albums / "Trips" / "2019"
    assert sorted(os.listdir(album)) == sorted(Path(rel).name for rel in trip)
    roll = {ino(mount.roll / n): n for n in os.listdir(mount.roll)}
    assert len(roll) == len(trip)
    for name in os.listdir(album):
        assert ino(album / name) in roll and nlink(album / name) == 2
    assert ino(album / "trip 000.jpeg") == ino(mount.roll / "old 0.jpg")
    assert "-> Albums/Trips/2019/trip 010.jpeg" in p.stdout
    assert "trip 000.jpeg: already in the library (SHA-256 " in p.stdout
    assert "; added to Albums/Trips/2019/trip 000.jpeg" in p.stdout
    no_side_files_left(album)
    # Again: nothing to import, nothing to add.
    p, counts = import_("--mount", mount.mp, "--album", "Trips/2019", src / "Archive/2019", check=True)
    assert counts == (0, len(trip), 0, 0) and "added to" not in p.stdout


def albumfs_mounts_of(store: Path) -> list[str]:
    return [e[1] for e in mount_entries() if e[2] == "fuse.albumfs" and e[0] == os.fspath(store)]


def test_an_unmounted_store_is_mounted_privately_and_always_unmounted(mount_factory, photos, tmp_path):
    src, media, _ = photos
    lib = mount_factory("lib", start=False)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = {"XDG_RUNTIME_DIR": os.fspath(runtime)}
    trip = {rel: h for rel, h in media.items() if rel.startswith("Archive/2019/")}

    # Interrupted: still unmounted, the private directory gone, the store free.
    rc, out = interrupt_after([ALBUMFS, "import", "--store", lib.store, src / "Archive/2019"], 10, env=env)
    assert rc == 130, out[-2000:]
    assert albumfs_mounts_of(lib.store) == [] and os.listdir(runtime) == []

    p, counts = import_("--store", lib.store, src / "Archive/2019", env=env, check=True)
    assert counts[0] == len(trip) - summary(out)[0] and counts[3] == 0, p.stdout[-2000:]
    assert albumfs_mounts_of(lib.store) == [] and os.listdir(runtime) == []

    lib.start()
    assert set(wait_for_index(lib.mp).values()) == set(trip.values())
    # Mounted now: the import goes through that mount (no second one; it would be refused).
    p, counts = import_("--store", lib.store, src / "Archive", env=env, check=True)
    assert counts == (0, len(trip) + 1, 1, 0), p.stdout[-2000:]
    assert albumfs_mounts_of(lib.store) == [os.fspath(lib.mp)] and os.listdir(runtime) == []


def test_usage_errors(mount, tmp_path):
    for args, message in [(["--mount", mount.mp], "SOURCE"),
                          (["--mount", mount.mp, "--store", tmp_path, tmp_path], "not both"),
                          (["--mount", mount.mp, "--album", "../x", tmp_path], "--album"),
                          (["--mount", tmp_path, tmp_path], "not an albumfs mount point"),
                          (["--mount", mount.mp, tmp_path / "missing"], "missing")]:
        p = run([ALBUMFS, "import", *args], check=False, text=True)
        assert p.returncode == 2 and message in p.stderr, (args, p.stderr)


def run_on_terminal(cmd: list, timeout: float = 60) -> tuple[int, str]:
    """Runs cmd with its stdout and stderr on a pseudo-terminal; (exit status, what it showed)."""
    import pty
    import select
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([os.fspath(c) for c in cmd], stdin=subprocess.DEVNULL, stdout=terminal,
                            stderr=terminal, close_fds=True)
    os.close(terminal)
    shown = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(controller, 65536)
                except OSError:   # EIO: the other side is closed
                    break
                if not chunk:
                    break
                shown += chunk
            elif proc.poll() is not None:
                break
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(controller)
    return rc, shown.decode(errors="replace")


def test_a_progress_bar_redrawn_in_place_on_a_terminal(mount, photos):
    src, media, _ = photos
    rc, shown = run_on_terminal([ALBUMFS, "import", "--mount", mount.mp, src])
    assert rc == 0, shown[-2000:]
    bar = re.compile(r"\r\[[#·]{20}\]  (\d+)/(\d+) files  [\d.]+/[\d.]+ MiB  [\d.]+ MiB/s  (\d+:\d\d|-:--) left\x1b\[K")
    frames = bar.findall(shown)
    assert frames, shown[-2000:]
    assert all(int(total) == len(media) + 4 for _, total, _ in frames)
    assert int(frames[-1][0]) == len(media) + 4, "the last frame shows every file done"
    assert not re.search(r"(^|[\r\n])imported ", shown), "no line per file on a terminal: the bar says it"
    assert summary(shown.replace("\r", "\n"))[0] == len(media)



def test_exit_1_when_a_photo_cannot_be_imported(mount_factory, photos):
    """A library mounted read-only: the first copy fails (EROFS), the import stops there (every
    next one would fail too) and says so; exit 1, not 0."""
    src, _, _ = photos
    lib = mount_factory("ro", options=["ro"])
    p, counts = import_("--mount", lib.mp, src / "Archive/2019")
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    assert counts == (0, 0, 0, 1)
    assert p.stdout.strip().splitlines()[-1].startswith("stopped: ")
    assert "Read-only file system" in p.stderr
    # A duplicate that cannot be added to the album asked for is a failure too, not a duplicate.
    lib.remount()
    (lib.albums / "Trip").mkdir()
    shutil.copyfile(src / "Archive/2019/trip/trip 000.jpeg", lib.roll / "a.jpeg")
    wait_for_index(lib.mp)
    lib.remount(options=["ro"])
    p, counts = import_("--mount", lib.mp, "--album", "Trip", src / "Archive/2019/trip/trip 000.jpeg")
    assert p.returncode == 1 and counts == (0, 0, 0, 1), p.stdout + p.stderr
    assert "already in the library, but not added to Albums/Trip" in p.stderr


def test_names_that_are_not_utf8_are_imported_byte_for_byte(mount, photos, tmp_path):
    """An old archive's Latin-1 name: opened, copied and named by its bytes (SEMANTICS.md § Assets
    and entries: names are byte strings). A symbolic link in a folder is not followed; one given
    as SOURCE is."""
    src, _, _ = photos
    archive = tmp_path / "archive"
    archive.mkdir()
    name = b"caf\xe9 2003.jpg"
    shutil.copyfile(src / "DCIM/100APPLE/IMG_0000.JPG", os.path.join(bytes(archive), name))
    os.symlink(src / "DCIM/101APPLE/IMG_0000.JPG", tmp_path / "link.jpg")   # not entered in a folder
    os.symlink(archive / "caf\udce9 2003.jpg", archive / "link.jpg")
    p, counts = import_("--mount", mount.mp, archive, check=True)
    assert counts == (1, 0, 0, 0)
    p, counts = import_("--mount", mount.mp, tmp_path / "link.jpg", check=True)   # but given by name: followed
    assert counts == (1, 0, 0, 0) and (mount.roll / "link.jpg").exists()
    os.unlink(mount.roll / "link.jpg")
    assert os.listdir(bytes(mount.roll)) == [name]
    assert sha256(os.path.join(bytes(mount.roll), name).decode("utf-8", "surrogateescape")) == \
        sha256(src / "DCIM/100APPLE/IMG_0000.JPG")
