"""One asset through a real mount: SEMANTICS.md § One asset (edits keep the original, Hidden,
pairs of real media made by Tests/media/make-media: a HEIC Live Photo, a DNG and a JPEG).

Edits are saved the ways programs save (an editor's rename-over, rsync, mv of a finished copy);
hiding and showing are plain mv; the owner-only Hidden/ is checked as another user on an
allow_other mount; the README's backup carries Hidden/ back hidden and leaves the originals out.
The crash workload (albumfs_workload.py) also edits, hides and shows under SIGKILL."""

from __future__ import annotations

import errno
import os
import random
import shutil
import time
import subprocess
from pathlib import Path

import pytest

from albumfs_testlib import (
    CRASH_SEED, albumfs, as_user, assert_fsck_clean, expect_errno, index_wait, ino, names, nlink, payload, read, run, write,
)


MAKE_MEDIA = Path(__file__).resolve().parent.parent / "media" / "make-media"


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("media")
    subprocess.run([str(MAKE_MEDIA), str(out)], check=True, stdout=subprocess.DEVNULL, timeout=300)
    return out


def asset_id(p) -> bytes:
    return os.getxattr(p, "user.albumfs.asset")


def months(mp) -> set[int]:
    """Every inode By Date shows."""
    found = set()
    for dirpath, _, files in os.walk(mp / "By Date"):
        found |= {os.lstat(os.path.join(dirpath, f)).st_ino for f in files}
    return found


def test_three_edits_keep_the_first_original_and_revert_gives_it_back(mount, tmp_path):
    """Edit by rename-over three times (an editor's safe save, rsync, mv of a finished copy): the
    asset keeps its albums, favorite and user.albumfs.asset; Smart Albums/Originals/x is the first
    version byte for byte and never in Recently Deleted; it is read-only. mv of it over the roll
    entry reverts: the first bytes under the roll name, in both albums, still a favorite."""
    m = mount
    a, b = m.albums / "A", m.albums / "B"
    a.mkdir()
    b.mkdir()
    versions = [payload(40_000 + i, f"version {i}") for i in range(4)]
    src = tmp_path / "src"
    src.mkdir()
    write(src / "x.jpg", versions[0])
    run(["cp", src / "x.jpg", a])
    first = ino(a / "x.jpg")
    os.link(a / "x.jpg", b / "b.jpg")
    os.link(m.roll / "x.jpg", m.mp / "Smart Albums" / "Favorites" / "x.jpg")
    identifier = asset_id(m.roll / "x.jpg")
    assert identifier == str(first).encode()

    write(a / ".x.jpg.swp", versions[1])                    # an editor's safe save
    os.rename(a / ".x.jpg.swp", a / "x.jpg")
    write(src / "x.jpg", versions[2])                       # rsync of a changed file
    run(["rsync", "--no-whole-file", "-t", src / "x.jpg", str(a) + "/"])
    write(src / "x.jpg.new", versions[3])                   # mv of a finished copy over it
    run(["cp", src / "x.jpg.new", b / ".b.jpg.part"])
    run(["mv", "-f", b / ".b.jpg.part", b / "b.jpg"])

    last = ino(m.roll / "x.jpg")
    assert ino(a / "x.jpg") == ino(b / "b.jpg") == last != first
    assert read(m.roll / "x.jpg") == versions[3]
    assert nlink(m.roll / "x.jpg") == 3
    assert names(m.mp / "Smart Albums" / "Favorites") == ["x.jpg"]
    assert asset_id(m.roll / "x.jpg") == asset_id(a / "x.jpg") == identifier
    assert names(m.mp / "Smart Albums" / "Edited") == ["x.jpg"]
    original = m.mp / "Smart Albums" / "Originals" / "x.jpg"
    assert ino(original) == first and read(original) == versions[0]
    assert run(["cmp", "-s", m.mp / "Smart Albums" / "Edited" / "x.jpg", original], check=False).returncode == 1
    deleted = [os.lstat(m.mp / "Recently Deleted" / n).st_ino for n in names(m.mp / "Recently Deleted")]
    assert len(deleted) == 2 and first not in deleted, "the intermediate versions only"
    expect_errno(errno.EPERM, os.open, original, os.O_WRONLY)
    expect_errno(errno.EPERM, os.chmod, original, 0o600)
    expect_errno(errno.EPERM, os.link, original, a / "copy.jpg")

    run(["mv", original, str(m.roll) + "/"])                # Revert to Original
    assert read(m.roll / "x.jpg") == versions[0]
    assert ino(m.roll / "x.jpg") == ino(a / "x.jpg") == ino(b / "b.jpg") == first
    assert names(m.mp / "Smart Albums" / "Favorites") == ["x.jpg"]
    assert asset_id(m.roll / "x.jpg") == identifier
    assert names(m.mp / "Smart Albums" / "Originals") == [] and names(m.mp / "Smart Albums" / "Edited") == []
    assert len(names(m.mp / "Recently Deleted")) == 3, "the reverted edit is recoverable"
    m.unmount()
    assert_fsck_clean(m.store, "after three edits and a revert")


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another uid needs root")
def test_hide_from_an_album_and_show_it_again(pub, mount_factory):
    """mv Albums/A/x Hidden/: gone from the roll, both albums, Favorites and By Date at once (also
    names the kernel had cached); Hidden/ lists it; another user on an allow_other mount gets
    EACCES for Hidden/ and what is in it. mv it to the roll: every membership is back."""
    m = mount_factory("m", mp=pub / "mnt", options=["allow_other"])
    a, b = m.albums / "A", m.albums / "B"
    a.mkdir()
    b.mkdir()
    write(a / "x.jpg", payload(30_000, "hidden one"))
    write(a / "y.jpg", payload(30_000, "visible one"))
    x = ino(a / "x.jpg")
    os.link(a / "x.jpg", b / "bx.jpg")
    os.link(m.roll / "x.jpg", m.mp / "Smart Albums" / "Favorites" / "x.jpg")
    index_wait(m.mp)
    assert x in months(m.mp)
    for p in (a / "x.jpg", b / "bx.jpg", m.roll / "x.jpg"):
        assert nlink(p) == 3   # cached by the kernel before the hide

    run(["mv", a / "x.jpg", str(m.mp / "Hidden") + "/"])
    assert names(m.roll) == ["y.jpg"] and names(a) == ["y.jpg"] and names(b) == []
    for p in (a / "x.jpg", b / "bx.jpg", m.roll / "x.jpg", m.mp / "Smart Albums" / "Favorites" / "x.jpg"):
        expect_errno(errno.ENOENT, os.stat, p)
    assert x not in months(m.mp)
    assert names(m.mp / "Hidden") == ["x.jpg"]
    assert ino(m.mp / "Hidden" / "x.jpg") == x and nlink(m.mp / "Hidden" / "x.jpg") == 1
    assert read(m.mp / "Hidden" / "x.jpg") == payload(30_000, "hidden one")
    assert as_user(["ls", m.roll]).returncode == 0, "control: nobody lists the roll"
    for cmd in (["ls", m.mp / "Hidden"], ["cat", m.mp / "Hidden" / "x.jpg"]):
        p = as_user(cmd)
        assert p.returncode != 0 and "Permission denied" in p.stderr, f"nobody: {cmd}: {p.stderr!r}"

    run(["mv", m.mp / "Hidden" / "x.jpg", str(m.roll) + "/"])
    assert names(m.mp / "Hidden") == []
    assert ino(m.roll / "x.jpg") == ino(a / "x.jpg") == ino(b / "bx.jpg") == x
    assert nlink(m.roll / "x.jpg") == 3
    assert names(m.mp / "Smart Albums" / "Favorites") == ["x.jpg"]
    assert x in months(m.mp)
    m.unmount()
    assert_fsck_clean(m.store, "after a hide and a show")


def test_backup_carries_hidden_back_hidden_and_leaves_originals_out(mount_factory, tmp_path):
    """The README's rsync backup and restore (SEMANTICS.md § Hidden, § Edits keep the original):
    a hidden photo comes back in Hidden/ of the new library (in no roll); an edited photo comes
    back as its current version, without its original."""
    src = mount_factory("src")
    write(src.roll / "h.jpg", payload(20_000, "hidden"))
    run(["mv", src.roll / "h.jpg", str(src.mp / "Hidden") + "/"])
    write(src.roll / "e.jpg", payload(20_000, "first"))
    write(src.roll / ".e.jpg.tmp", payload(20_000, "edited"))
    os.rename(src.roll / ".e.jpg.tmp", src.roll / "e.jpg")
    excludes = ["--exclude=/Recently Deleted/", "--exclude=/By Date/", "--exclude=/Smart Albums/"]
    backup = tmp_path / "backup"
    run(["rsync", "-aH", "--delete", *excludes, str(src.mp) + "/", str(backup) + "/"])
    assert sorted(os.listdir(backup / "Hidden")) == ["h.jpg"]

    dst = mount_factory("dst")
    run(["rsync", "-aH", *excludes, str(backup) + "/", str(dst.mp) + "/"])
    assert names(dst.mp / "Hidden") == ["h.jpg"]
    assert read(dst.mp / "Hidden" / "h.jpg") == payload(20_000, "hidden")
    assert names(dst.roll) == ["e.jpg"]
    assert read(dst.roll / "e.jpg") == payload(20_000, "edited")
    assert names(dst.mp / "Smart Albums" / "Originals") == []
    second = run(["rsync", "-aHi", *excludes, str(backup) + "/", str(dst.mp) + "/"], text=True, stdout=subprocess.PIPE)
    assert second.stdout.strip() == "", f"a second restore transfers nothing:\n{second.stdout}"


def test_live_photo_halves_in_two_albums_become_one_asset(mount, media):
    """Items 1 and 3: the still copied into A and its video into B; after index --wait both names
    are in A, B and the roll, with one user.albumfs.asset. rm of the MOV in B takes both out of B
    and leaves both in the roll; rm of the HEIC in the roll puts both in Recently Deleted; mv of
    the MOV back restores both, with A."""
    m = mount
    a, b = m.albums / "A", m.albums / "B"
    a.mkdir()
    b.mkdir()
    shutil.copyfile(media / "live2.heic", a / "IMG_1.HEIC")
    shutil.copyfile(media / "live2.mov", b / "IMG_1.MOV")
    names(a), names(b), nlink(m.roll / "IMG_1.MOV")   # cached by the kernel before the pairing
    index_wait(m.mp)
    both = ["IMG_1.HEIC", "IMG_1.MOV"]
    assert names(a) == names(b) == names(m.roll) == both
    assert asset_id(m.roll / "IMG_1.HEIC") == asset_id(m.roll / "IMG_1.MOV")
    assert ino(a / "IMG_1.MOV") == ino(m.roll / "IMG_1.MOV") and nlink(m.roll / "IMG_1.MOV") == 3

    run(["rm", b / "IMG_1.MOV"])
    assert names(b) == [] and names(m.roll) == both and names(a) == both
    expect_errno(errno.ENOENT, os.stat, b / "IMG_1.HEIC")
    run(["rm", m.roll / "IMG_1.HEIC"])
    assert names(m.roll) == [] and names(a) == []
    assert names(m.mp / "Recently Deleted") == both
    run(["mv", m.mp / "Recently Deleted" / "IMG_1.MOV", str(m.roll) + "/"])
    assert names(m.roll) == both and names(a) == both and names(m.mp / "Recently Deleted") == []
    m.unmount()
    assert_fsck_clean(m.store, "after a Live Photo pair's life")


def test_raw_and_jpeg_of_one_shot_pair_and_unpair_splits_them(mount, media):
    """Item 2: DSC_1.DNG and DSC_1.JPG copied together pair; ln of the JPEG adds both; unpair makes
    two assets, each in the albums the pair was in; then rm of the JPEG leaves the DNG."""
    m = mount
    c, d = m.albums / "C", m.albums / "D"
    c.mkdir()
    d.mkdir()
    shutil.copyfile(media / "raw.dng", c / "DSC_1.DNG")
    shutil.copyfile(media / "nodate.jpg", c / "DSC_1.JPG")
    index_wait(m.mp)
    assert asset_id(c / "DSC_1.DNG") == asset_id(c / "DSC_1.JPG")
    os.link(m.roll / "DSC_1.JPG", d / "DSC_1.JPG")
    assert names(d) == ["DSC_1.DNG", "DSC_1.JPG"]
    run(["setfattr", "-n", "user.albumfs.unpair", "-v", "1", d / "DSC_1.DNG"])
    assert asset_id(c / "DSC_1.DNG") != asset_id(c / "DSC_1.JPG")
    assert names(c) == names(d) == ["DSC_1.DNG", "DSC_1.JPG"]
    run(["rm", d / "DSC_1.JPG"])
    assert names(d) == ["DSC_1.DNG"] and names(c) == ["DSC_1.DNG", "DSC_1.JPG"]
    m.unmount()
    assert_fsck_clean(m.store, "after a RAW+JPEG pair and its unpair")


def test_a_kill_while_pairs_form_leaves_whole_pairs(mount, media):
    """Item 6: two Live Photos and three RAW+JPEG shots, each half in an album of its own, the
    daemon SIGKILLed at a seeded moment while their facts are read and the pairs form; after a
    remount and index --wait every pair is whole (one identifier, both halves in both albums)
    and fsck is clean: never half a pair."""
    m = mount
    rng = random.Random(CRASH_SEED)
    pairs = [("live.jpg", "live.mov", "L1.JPG", "L1.MOV"), ("live2.heic", "live2.mov", "L2.HEIC", "L2.MOV")]
    pairs += [("nodate.jpg", "raw.dng", f"DSC_{i}.JPG", f"DSC_{i}.DNG") for i in range(3)]
    for k, (first, second, name1, name2) in enumerate(pairs):
        for half, (source, name) in enumerate(((first, name1), (second, name2))):
            album = m.albums / f"P{k}-{half}"
            album.mkdir()
            shutil.copyfile(media / source, album / name)
    delay = rng.uniform(0.0, 0.4)
    time.sleep(delay)   # the seeded kill moment, not a wait for anything
    m.kill()
    m.start()
    index_wait(m.mp)
    for k, (_, _, name1, name2) in enumerate(pairs):
        assert asset_id(m.roll / name1) == asset_id(m.roll / name2), f"pair {k} (kill {delay:.3f} s in, seed {CRASH_SEED})"
        for half in (0, 1):
            assert names(m.albums / f"P{k}-{half}") == sorted([name1, name2]), f"pair {k}, album {half}"
    m.unmount()
    assert_fsck_clean(m.store, f"after a kill {delay:.3f} s into pairing (seed {CRASH_SEED})")


def test_import_returns_with_its_pairs_made(mount, media, tmp_path):
    """"Import pairs them at once": albumfs import of a camera folder with a Live Photo and a
    RAW+JPEG shot returns once both are paired (no index --wait here)."""
    card = tmp_path / "card" / "DCIM"
    card.mkdir(parents=True)
    shutil.copyfile(media / "live2.heic", card / "IMG_9.HEIC")
    shutil.copyfile(media / "live2.mov", card / "IMG_9.MOV")
    shutil.copyfile(media / "raw.dng", card / "DSC_9.DNG")
    shutil.copyfile(media / "nodate.jpg", card / "DSC_9.JPG")
    albumfs("import", "--mount", mount.mp, "--album", "Card", card)
    album = mount.albums / "Card"
    assert names(album) == ["DSC_9.DNG", "DSC_9.JPG", "IMG_9.HEIC", "IMG_9.MOV"]
    assert asset_id(album / "IMG_9.HEIC") == asset_id(album / "IMG_9.MOV")
    assert asset_id(album / "DSC_9.DNG") == asset_id(album / "DSC_9.JPG")


def test_pairs_stay_whole_under_racing_operations(mount, media):
    """Item 7's concurrency with pairs: eight RAW+JPEG pairs, four threads racing ln, rm in an
    album, hide, show, delete and restore on random halves (an operation may lose a race: ENOENT,
    EEXIST, and EPERM for an ln of what was hidden or deleted after its lookup); afterwards every pair is whole: both files in the same place (roll, Hidden/ or
    Recently Deleted) and in the same albums. Then fsck is clean."""
    import threading
    m = mount
    count = 8
    albums = [m.albums / f"A{k}" for k in range(3)]
    for a in albums:
        a.mkdir()
    for i in range(count):
        shutil.copyfile(media / "raw.dng", m.roll / f"DSC_{i}.DNG")
        shutil.copyfile(media / "nodate.jpg", m.roll / f"DSC_{i}.JPG")
    index_wait(m.mp)
    halves = {i: (ino(m.roll / f"DSC_{i}.JPG"), ino(m.roll / f"DSC_{i}.DNG")) for i in range(count)}
    assert all(asset_id(m.roll / f"DSC_{i}.JPG") == asset_id(m.roll / f"DSC_{i}.DNG") for i in range(count))
    hidden, deleted = m.mp / "Hidden", m.mp / "Recently Deleted"
    lost = (errno.ENOENT, errno.EEXIST)

    def find(directory, inode):
        for n in os.listdir(directory):
            try:
                if os.lstat(directory / n).st_ino == inode:
                    return directory / n
            except FileNotFoundError:
                pass
        return None

    def racer(seed):
        rng = random.Random(seed)
        for _ in range(120):
            i, half = rng.randrange(count), rng.randrange(2)
            inode = halves[i][half]
            op = rng.choice(["ln", "rm_album", "hide", "show", "delete", "restore"])
            try:
                if op == "ln" and (p := find(m.roll, inode)):
                    os.link(p, rng.choice(albums) / p.name)
                elif op == "rm_album":
                    a = rng.choice(albums)
                    if p := find(a, inode):
                        os.unlink(p)
                elif op == "hide" and (p := find(m.roll, inode)):
                    os.rename(p, hidden / p.name)
                elif op == "show" and (p := find(hidden, inode)):
                    os.rename(p, m.roll / p.name)
                elif op == "delete" and (p := find(m.roll, inode)):
                    os.unlink(p)
                elif op == "restore" and (p := find(deleted, inode)):
                    os.rename(p, m.roll / p.name)
            except OSError as e:
                # ln names the inode the kernel looked up: hidden or deleted since, it is EPERM
                # (SEMANTICS.md § Hidden: only what the roll shows can be linked).
                if e.errno not in lost and not (op == "ln" and e.errno == errno.EPERM):
                    raise

    errors = []

    def run_racer(seed):
        try:
            racer(seed)
        except BaseException as e:   # reported below, with the seed
            errors.append(f"racer {seed}: {e!r}")

    threads = [threading.Thread(target=run_racer, args=(CRASH_SEED + k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a racer is stuck"
    assert not errors, errors

    def place(inode):
        where = [d for d in (m.roll, hidden, deleted) if find(d, inode)]
        in_albums = sorted(a.name for a in albums if find(a, inode))
        return where, in_albums

    for i, (jpg, raw) in halves.items():
        assert place(jpg) == place(raw), f"pair {i} split (seed {CRASH_SEED}): JPG {place(jpg)}, DNG {place(raw)}"
        assert len(place(jpg)[0]) == 1, f"pair {i} is in {place(jpg)[0]}"
    m.unmount()
    assert_fsck_clean(m.store, f"after racing operations on pairs (seed {CRASH_SEED})")
