"""SEMANTICS.md § What albumfs knows of each asset, and the computed views, on real mounts with
media made by real tools (Tests/media/make-media: ImageMagick, exiftool, heif-enc, ffmpeg), the
expected values from exiftool, ffprobe and sha256sum. Facts are computed after close() (the
contract says "within a few seconds"): the tests wait for them with `albumfs index --wait`
(bounded); nothing else waits."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from albumfs_testlib import ALBUMFS, expect_errno, index_wait, ino, nlink, run

MAKE_MEDIA = Path(__file__).resolve().parent.parent / "media" / "make-media"


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("media")
    subprocess.run([str(MAKE_MEDIA), str(out)], check=True, stdout=subprocess.DEVNULL, timeout=300)
    return out, json.loads((out / "expected.json").read_text())


def fact(path, name: str) -> str | None:
    try:
        return os.getxattr(path, f"user.albumfs.{name}").decode()
    except OSError as e:
        if e.errno == errno.ENODATA:
            return None
        raise


def mount_point_of(path) -> Path:
    path = Path(path)
    while not os.path.ismount(path):
        path = path.parent
    return path


def wait_for_facts(paths, sha256s=None) -> None:
    """`albumfs index --wait` on the paths' mount (facts are eventual by contract; it returns once
    every closed file is read), then every path has its sha256 (the expected one, when given)."""
    index_wait(mount_point_of(paths[0]))
    got = [fact(path, "sha256") for path in paths]
    assert None not in got, f"no facts after index --wait: {[str(p) for p, v in zip(paths, got) if v is None]}"
    if sha256s is not None:
        assert got == list(sha256s), "sha256 after index --wait"


def copy_media(media_dir: Path, names, target: Path) -> list[Path]:
    copied = []
    for name in names:
        shutil.copyfile(media_dir / name, target / name)
        copied.append(target / name)
    return copied


def number(text):
    return None if text is None else float(text)


def test_attributes_equal_what_exiftool_ffprobe_and_sha256sum_say(mount, media):
    """Item 1: type, kind, captured, width, height, duration, location, sha256 of each file."""
    media_dir, expected = media
    names = sorted(expected)
    paths = copy_media(media_dir, names, mount.roll)
    wait_for_facts(paths, [expected[n]["sha256"] for n in names])
    for name, path in zip(names, paths):
        e = expected[name]
        got = {k: fact(path, k) for k in ("type", "kind", "captured", "width", "height", "location", "sha256")}
        want = {"type": e["type"], "kind": e["kind"], "captured": e["captured"],
                "width": None if e["width"] is None else str(e["width"]),
                "height": None if e["height"] is None else str(e["height"]),
                "location": e["location"], "sha256": e["sha256"]}
        assert got == want, name
        if e["duration"] is None:
            assert fact(path, "duration") is None, name
        else:
            assert number(fact(path, "duration")) == pytest.approx(e["duration"], abs=0.01), name
        assert fact(path, "id") == str(os.stat(path).st_ino)


def test_index_wait_returns_once_every_closed_file_is_read(mount, media):
    """`albumfs index --wait` (SEMANTICS.md: returns when nothing is pending): right after it,
    every file copied before it has its facts, with no polling."""
    media_dir, expected = media
    names = sorted(expected)
    paths = copy_media(media_dir, names, mount.roll)
    index_wait(mount.mp)
    assert [fact(p, "sha256") for p in paths] == [expected[n]["sha256"] for n in names]
    assert os.getxattr(mount.mp, "user.albumfs.indexing") == b"0"


def test_a_file_rewritten_in_place_gets_new_values(mount, media):
    media_dir, expected = media
    target = mount.roll / "x.jpg"
    shutil.copyfile(media_dir / "live.jpg", target)
    wait_for_facts([target], [expected["live.jpg"]["sha256"]])
    with open(media_dir / "nodate.jpg", "rb") as src, open(target, "r+b") as dst:
        dst.truncate(0)
        dst.write(src.read())
    wait_for_facts([target], [expected["nodate.jpg"]["sha256"]])
    assert fact(target, "captured") is None
    assert fact(target, "width") == str(expected["nodate.jpg"]["width"])


def test_by_date_uses_the_photos_own_date_in_any_daemon_time_zone(mount_factory, media):
    """Item 2: the JPEG captured 2019-07-14T09:30+02:00 is in By Date/2019/2019-07 with the daemon
    in New York; a file with no date sits under its modification month (the daemon's local time:
    2020-03-01T02:00Z is still February in New York)."""
    media_dir, expected = media
    m = mount_factory("ny", env={"TZ": "America/New_York"})
    dated, undated = copy_media(media_dir, ["live.jpg", "notes.txt"], m.roll)
    os.utime(undated, (1583028000, 1583028000))   # 2020-03-01T02:00:00Z
    wait_for_facts([dated, undated])
    month = m.mp / "By Date" / "2019" / "2019-07"
    assert os.listdir(month) == ["live.jpg"]
    assert ino(month / "live.jpg") == ino(dated)
    index_wait(m.mp)   # the new mtime is read again after the utime (queued before it returned)
    assert os.listdir(m.mp / "By Date" / "2020" / "2020-02") == ["notes.txt"], os.listdir(m.mp / "By Date")
    assert sorted(os.listdir(m.mp / "By Date")) == ["2019", "2020"]
    assert os.listdir(m.mp / "By Date" / "2020") == ["2020-02"]


def test_smart_albums_hold_exactly_their_assets(mount, media):
    """Item 3: Videos, Live Photos, Screenshots, RAW; same st_ino as the roll; st_nlink unchanged
    by views. A Live Photo is one asset: the views show it once, by its still (SEMANTICS.md §
    Pairs), so its video is in neither Videos nor Live Photos."""
    media_dir, expected = media
    names = sorted(expected)
    paths = copy_media(media_dir, names, mount.roll)
    wait_for_facts(paths)
    smart = mount.mp / "Smart Albums"
    assert sorted(os.listdir(smart)) == ["Duplicates", "Edited", "Favorites", "Live Photos", "Originals", "RAW", "Screenshots", "Videos"]
    live_videos = {"live.mov", "live2.mov"}
    assert sorted(os.listdir(smart / "Videos")) == sorted(n for n in names if expected[n]["kind"] == "video"
                                                          and n not in live_videos)
    assert sorted(os.listdir(smart / "Live Photos")) == ["live.jpg", "live2.heic"]
    assert sorted(os.listdir(smart / "Screenshots")) == sorted(n for n in names if expected[n]["isScreenshot"])
    assert sorted(os.listdir(smart / "RAW")) == ["raw.dng"]
    for view in ("Videos", "Live Photos", "Screenshots", "RAW"):
        for name in os.listdir(smart / view):
            assert ino(smart / view / name) == ino(mount.roll / name)
            assert nlink(smart / view / name) == 1, "views are not links"


def test_favorites_ln_sets_and_rm_clears_and_views_refuse_everything_else(mount, media):
    media_dir, _ = media
    (mount.albums / "A").mkdir()
    [photo] = copy_media(media_dir, ["live.jpg"], mount.albums / "A")
    wait_for_facts([photo])
    favorites = mount.mp / "Smart Albums" / "Favorites"
    run(["ln", str(mount.roll / "live.jpg"), str(favorites) + "/"])
    assert fact(mount.roll / "live.jpg", "favorite") == "1"
    assert os.listdir(favorites) == ["live.jpg"]
    assert nlink(mount.roll / "live.jpg") == 2, "roll + A: Favorites is not a link"
    os.unlink(favorites / "live.jpg")
    assert fact(mount.roll / "live.jpg", "favorite") is None
    assert os.listdir(favorites) == [] and os.listdir(mount.albums / "A") == ["live.jpg"]
    month = mount.mp / "By Date" / "2019" / "2019-07"
    videos = mount.mp / "Smart Albums" / "Videos"
    expect_errno(errno.EPERM, os.unlink, month / "live.jpg")
    expect_errno(errno.EPERM, os.rename, month / "live.jpg", mount.roll / "other.jpg")
    expect_errno(errno.EPERM, os.link, mount.roll / "live.jpg", videos / "live.jpg")
    expect_errno(errno.EPERM, os.mkdir, mount.mp / "By Date" / "mine")
    expect_errno(errno.EPERM, os.rmdir, videos)
    expect_errno(errno.EPERM, lambda: open(month / "new.jpg", "wb"))
    expect_errno(errno.EPERM, os.chmod, month, 0o700)
    expect_errno(errno.EPERM, os.setxattr, month, "user.note", b"x")
    assert os.listxattr(month) == [] and nlink(month) == 2
    assert os.listdir(mount.roll) == ["live.jpg"]


def test_duplicates_and_dedupe(mount_factory, media):
    """Item 4: two identical files under different names in different albums are one set;
    albumfs dedupe --dry-run changes nothing; dedupe leaves one asset in both albums and the
    other in Recently Deleted."""
    media_dir, expected = media
    m = mount_factory("m")
    (m.albums / "A").mkdir()
    (m.albums / "B").mkdir()
    shutil.copyfile(media_dir / "live.jpg", m.albums / "A" / "one.jpg")
    shutil.copyfile(media_dir / "live.jpg", m.albums / "B" / "two.jpg")
    wait_for_facts([m.roll / "one.jpg", m.roll / "two.jpg"])
    duplicates = m.mp / "Smart Albums" / "Duplicates"
    sha = expected["live.jpg"]["sha256"]
    assert os.listdir(duplicates) == [sha[:12]]
    assert sorted(os.listdir(duplicates / sha[:12])) == ["one.jpg", "two.jpg"]
    kept = ino(m.roll / "one.jpg")
    dry = run([ALBUMFS, "dedupe", "--dry-run", str(m.mp)], text=True).stdout
    assert "one.jpg" in dry and "two.jpg" in dry
    assert sorted(os.listdir(m.roll)) == ["one.jpg", "two.jpg"]
    run([ALBUMFS, "dedupe", str(m.mp)])
    assert os.listdir(m.roll) == ["one.jpg"]
    assert ino(m.albums / "A" / "one.jpg") == ino(m.albums / "B" / "two.jpg") == kept
    assert os.listdir(m.mp / "Recently Deleted") == ["two.jpg"]
    assert os.listdir(duplicates) == []
    assert nlink(m.roll / "one.jpg") == 3


def test_dedupe_reports_the_asset_the_daemon_keeps(mount_factory, media):
    """SEMANTICS.md § the computed views: the earliest import is kept, and `albumfs dedupe` names
    that one, dry run or not, even when it is not the lowest st_ino (imported while the store's
    clock was behind: ALBUMFS_CLOCK_OFFSET)."""
    media_dir, _ = media
    m = mount_factory("m")
    shutil.copyfile(media_dir / "live.jpg", m.roll / "one.jpg")
    m.unmount()
    m.env = {"ALBUMFS_CLOCK_OFFSET": str(-86400)}
    m.start()
    shutil.copyfile(media_dir / "live.jpg", m.roll / "two.jpg")
    wait_for_facts([m.roll / "one.jpg", m.roll / "two.jpg"])
    earliest = ino(m.roll / "two.jpg")
    assert earliest > ino(m.roll / "one.jpg")
    dry = run([ALBUMFS, "dedupe", "--dry-run", str(m.mp)], text=True).stdout
    assert "would keep two.jpg; would merge one.jpg" in dry, dry
    done = run([ALBUMFS, "dedupe", str(m.mp)], text=True).stdout
    assert "kept two.jpg; merged one.jpg" in done, done
    assert os.listdir(m.roll) == ["two.jpg"] and ino(m.roll / "two.jpg") == earliest


def test_fsck_verify_finds_a_flipped_byte(mount_factory, media):
    """Item 5: one byte flipped in a content file (unmounted): fsck --verify names that asset and
    exits 1; without --verify fsck does not read the data."""
    media_dir, _ = media
    m = mount_factory("m")
    paths = copy_media(media_dir, ["live.jpg", "clip.mp4"], m.roll)
    wait_for_facts(paths)
    victim = ino(m.roll / "clip.mp4")
    m.unmount()
    clean = run([ALBUMFS, "fsck", "--verify", "--store", str(m.store)], text=True, check=False)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    content = m.store / "content" / f"{victim:016x}"[-2:] / f"{victim:016x}"
    if not content.exists():
        [content] = [p for p in (m.store / "content").rglob(f"{victim:016x}")]
    data = bytearray(content.read_bytes())
    data[len(data) // 2] ^= 0xFF
    content.write_bytes(bytes(data))
    bad = run([ALBUMFS, "fsck", "--verify", "--store", str(m.store)], text=True, check=False)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "clip.mp4" in bad.stdout and str(victim) in bad.stdout
    plain = run([ALBUMFS, "fsck", "--store", str(m.store)], text=True, check=False)
    assert plain.returncode == 0, "fsck without --verify reads no data: the flip is not its business"


def cache(*directories) -> None:
    """ls -l: the kernel now holds every name of these directories."""
    for directory in directories:
        for name in os.listdir(directory):
            os.lstat(directory / name)


def test_view_names_never_go_stale(mount_factory, media):
    """SEMANTICS.md § Visibility, in the views: names the kernel cached (ls -l) are gone the moment
    a call that removes them returns (rename and rm in the roll, dedupe), and the moment a
    rewrite's new facts are in (index --wait); no retry."""
    media_dir, expected = media
    m = mount_factory("m")
    (m.albums / "A").mkdir()
    copy_media(media_dir, ["live.jpg", "clip.mp4"], m.roll)
    shutil.copyfile(media_dir / "live.jpg", m.albums / "A" / "twin.jpg")
    index_wait(m.mp)
    by_date, smart = m.mp / "By Date", m.mp / "Smart Albums"
    july, videos = by_date / "2019" / "2019-07", smart / "Videos"
    sha = expected["live.jpg"]["sha256"][:12]
    cache(by_date, by_date / "2019", by_date / "2021", july, videos, smart / "Duplicates", smart / "Duplicates" / sha)
    assert sorted(os.listdir(july)) == ["live.jpg", "twin.jpg"]

    os.rename(m.roll / "live.jpg", m.roll / "paris.jpg")
    expect_errno(errno.ENOENT, os.lstat, july / "live.jpg")
    expect_errno(errno.ENOENT, os.lstat, smart / "Duplicates" / sha / "live.jpg")
    assert ino(july / "paris.jpg") == ino(m.roll / "paris.jpg")

    os.unlink(m.roll / "clip.mp4")
    expect_errno(errno.ENOENT, os.lstat, videos / "clip.mp4")
    expect_errno(errno.ENOENT, os.lstat, by_date / "2021")

    cache(july, smart / "Duplicates" / sha)
    run([ALBUMFS, "dedupe", str(m.mp)])
    expect_errno(errno.ENOENT, os.lstat, july / "twin.jpg")
    expect_errno(errno.ENOENT, os.lstat, smart / "Duplicates" / sha)

    cache(july)
    with open(media_dir / "nodate.jpg", "rb") as src, open(m.roll / "paris.jpg", "r+b") as dst:
        dst.truncate(0)
        dst.write(src.read())
    index_wait(m.mp)
    expect_errno(errno.ENOENT, os.lstat, july / "paris.jpg")
    expect_errno(errno.ENOENT, os.lstat, by_date / "2019")


def listed(directory) -> list[str]:
    """The listing, read twice: the second time from the kernel's cache wherever it may keep one."""
    os.listdir(directory)
    return sorted(os.listdir(directory))


def test_view_listings_never_go_stale(mount_factory, media):
    """SEMANTICS.md § Visibility, in the views' listings, which the kernel may keep (opendir's
    cache_readdir): names that appear (facts read in the background, a favorite set, a roll
    rename) and names that go (rm) show in the next listing once the call or index --wait
    returned; no retry. Fails if a view's cached listing is kept across a change."""
    media_dir, _expected = media
    m = mount_factory("m")
    by_date, smart = m.mp / "By Date", m.mp / "Smart Albums"
    july, videos, favorites = by_date / "2019" / "2019-07", smart / "Videos", smart / "Favorites"
    assert listed(by_date) == [] and listed(videos) == [] and listed(favorites) == []

    copy_media(media_dir, ["live.jpg"], m.roll)
    index_wait(m.mp)
    assert listed(by_date) == ["2019"]
    assert listed(july) == ["live.jpg"]

    shutil.copyfile(media_dir / "live.jpg", m.roll / "twin.jpg")
    copy_media(media_dir, ["clip.mp4"], m.roll)
    index_wait(m.mp)
    assert listed(july) == ["live.jpg", "twin.jpg"]
    assert listed(videos) == ["clip.mp4"]
    assert listed(by_date) == ["2019", "2021"]

    run(["ln", str(m.roll / "live.jpg"), str(favorites) + "/"])
    assert listed(favorites) == ["live.jpg"]

    os.rename(m.roll / "twin.jpg", m.roll / "paris.jpg")
    assert listed(july) == ["live.jpg", "paris.jpg"]

    os.unlink(m.roll / "clip.mp4")
    assert listed(videos) == []
    assert listed(by_date) == ["2019"]
