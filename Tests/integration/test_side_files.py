"""SEMANTICS.md § Files that are not photos: side files. Files programs write next to photos
(.DS_Store, ._x, Thumbs.db, desktop.ini, editors' swap files, GIO's and rsync's temporaries,
downloads in progress) belong to the directory they were made in and never become assets; renamed
to an ordinary name they become one, as if created there."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from albumfs_testlib import ino, names, nlink, payload, read, run, write

SIDE = [".DS_Store", "._beach.jpg", "Thumbs.db", "desktop.ini", ".x.jpg.swp", ".goutputstream-AB12CD",
        "~$report.docx", "movie.mp4.part", "video.crdownload"]


def test_side_files_stay_in_their_album(mount):
    """Each kind of side file created in an album: readable and writable there, never in the roll,
    st_nlink 1, not counted by statfs; rm removes it; an album with only side files is not empty."""
    a = mount.albums / "A"
    a.mkdir()
    write(a / "beach.jpg", payload(10_000, "beach"))
    for n in SIDE:
        write(a / n, payload(100, n))
    assert names(mount.roll) == ["beach.jpg"]
    assert sorted(names(a)) == sorted(SIDE + ["beach.jpg"])
    for n in SIDE:
        assert nlink(a / n) == 1 and read(a / n) == payload(100, n)
    files = os.statvfs(mount.mp)
    assert files.f_files - files.f_ffree == 1, "side files are no assets"
    os.unlink(a / "._beach.jpg")
    assert "._beach.jpg" not in names(a) and names(mount.roll) == ["beach.jpg"]
    os.unlink(a / "beach.jpg")
    try:
        os.rmdir(a)
        raise AssertionError("rmdir of an album holding side files succeeded")
    except OSError as e:
        assert e.errno == 39  # ENOTEMPTY
    run(["rm", "-r", a])
    assert not a.exists() and names(mount.roll) == ["beach.jpg"]


def test_safe_save_lands_the_photo_without_a_temporary_in_the_roll(mount, tmp_path):
    """A temporary written next to a photo and renamed over it (rsync, GIO "Replace", editors) is
    the new version in the album and the roll; the roll never shows the temporary name."""
    a = mount.albums / "A"
    a.mkdir()
    write(a / "p.jpg", b"v1")
    write(a / ".p.jpg.XyZ123", b"v2")
    assert names(mount.roll) == ["p.jpg"]
    os.rename(a / ".p.jpg.XyZ123", a / "p.jpg")
    assert read(mount.roll / "p.jpg") == b"v2" and ino(mount.roll / "p.jpg") == ino(a / "p.jpg")
    assert names(mount.roll) == ["p.jpg"]
    # And rsync itself, twice.
    src = tmp_path / "src"
    src.mkdir()
    for i in range(20):
        write(src / f"r{i}.jpg", payload(5000, f"r{i}"))
    run(["rsync", "-a", f"{src}/", f"{a}/"])
    write(src / "r3.jpg", payload(6000, "r3 again"))
    run(["rsync", "-a", f"{src}/", f"{a}/"])
    assert sorted(names(mount.roll)) == sorted(["p.jpg"] + [f"r{i}.jpg" for i in range(20)])
    assert read(mount.roll / "r3.jpg") == payload(6000, "r3 again")


def test_interrupted_rsync_leaves_no_temporary_in_the_roll(mount, tmp_path):
    """rsync into an album stopped by SIGINT in the middle of 100 files: the roll holds only
    complete photos under their own names, never rsync's .NAME.XXXXXX temporaries."""
    a = mount.albums / "A"
    a.mkdir()
    src = tmp_path / "src"
    src.mkdir()
    for i in range(100):
        write(src / f"IMG_{i:04}.JPG", payload(1 << 20, f"img{i}"))
    # rsync's sender, receiver and generator are one session: SIGINT goes to all, as from a terminal.
    p = subprocess.Popen(["rsync", "-a", "--bwlimit=20000", f"{src}/", f"{a}/"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while len([n for n in names(mount.roll)]) < 10 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGINT)
    p.wait(timeout=60)
    deadline = time.monotonic() + 30
    while subprocess.run(["pgrep", "-s", str(p.pid)], stdout=subprocess.DEVNULL).returncode == 0:
        assert time.monotonic() < deadline, "rsync's processes outlived SIGINT by 30 s"
        time.sleep(0.05)
    roll = names(mount.roll)
    assert roll, "rsync copied nothing before the interrupt"
    assert len(roll) < 100, "rsync finished before the interrupt: the test proves nothing"
    assert all(not n.startswith(".") for n in roll), f"temporaries in the roll: {[n for n in roll if n.startswith('.')]}"
    for n in roll:
        assert read(mount.roll / n) == read(src / n), f"{n} is incomplete in the roll"


def test_vim_edit_in_an_album_leaves_no_swap_file_in_the_roll(mount, tmp_path):
    """vim edits a file in an album (its swap file .NAME.swp next to it), :w, :q: the roll holds
    the file once, under its own name, and nothing else."""
    import shutil
    import pytest
    if shutil.which("vim") is None:
        pytest.skip("vim is not installed")
    a = mount.albums / "A"
    a.mkdir()
    write(a / "note.txt", b"first line\n")
    swapname = tmp_path / "swapname"
    run(["vim", "-u", "NONE", "-N", "-es", "-c", f'call writefile([swapname("%")], "{swapname}")',
         "-c", "normal Ahello", "-c", "w", "-c", "q", a / "note.txt"], cwd=a, timeout=60)
    assert swapname.read_text().strip().endswith("/Albums/A/.note.txt.swp"), "vim kept its swap file elsewhere"
    assert names(mount.roll) == ["note.txt"]
    assert names(a) == ["note.txt"]
    assert read(mount.roll / "note.txt") == b"first linehello\n"
    assert names(mount.mp / "Recently Deleted") == []
