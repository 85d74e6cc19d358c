"""SEMANTICS.md § Surviving the machine: a library rebuilt from its bucket alone, against a real
RADOS Gateway on loopback. A session of changes through the mount, `sync --wait`, the store
deleted with `rm -rf`; `albumfs recover` gives back what a listing showed before the loss."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from albumfs_testlib import ALBUMFS, index_wait, payload, run, sha256, write
from test_remote import SYNC_TIMEOUT, gateway, sync  # noqa: F401 (gateway: the module's radosgw, a fixture)


@pytest.fixture
def library(gateway, mount_factory, tmp_path, request):
    """A store made with `albumfs init --remote` in a bucket of its own, mounted with
    cache_size=0 (every original evicted once uploaded) and the keys in its environment."""
    bucket = "r" + format(abs(hash(request.node.name)) % 10**12, "x")
    keys = {"AWS_ACCESS_KEY_ID": gateway.access_key, "AWS_SECRET_ACCESS_KEY": gateway.secret_key}
    store = tmp_path / "m" / "store"
    store.parent.mkdir(parents=True)
    run([ALBUMFS, "init", "--remote", f"s3://{bucket}/lib", "--endpoint", gateway.endpoint, store],
        env={**os.environ, **keys})
    m = mount_factory("m", store=store, env=keys, options=["cache_size=0"])
    m.bucket, m.keys, m.gateway, m.store_path = bucket, keys, gateway, store
    return m


def listing(mp) -> dict[str, tuple]:
    """path -> (inode, size, SHA-256 of the bytes, favorite) of every entry under the roll,
    Albums and Recently Deleted (an album entry shares its roll entry's inode)."""
    found = {}
    for top in ("Camera Roll", "Albums", "Recently Deleted"):
        for directory, dirs, files in os.walk(mp / top):
            for name in dirs + files:
                path = os.path.join(directory, name)
                st = os.lstat(path)
                if name in files:
                    try:
                        favorite = os.getxattr(path, "user.albumfs.favorite").decode()
                    except OSError:
                        favorite = "-"
                    with open(path, "rb") as f:
                        found[os.path.relpath(path, mp)] = (st.st_ino, st.st_size, sha256(f.read()), favorite)
                else:
                    found[os.path.relpath(path, mp)] = (st.st_ino, "dir")
    return found


def imported_with_album(m, count: int, size: int, tag: str, in_album: tuple[str, ...]) -> dict[str, bytes]:
    """`count` photos IMG_0.JPG… (of `size` bytes and 100 more each) into the roll, the album
    `Shared` holding `in_album` of them, then `sync --wait`; name -> bytes."""
    photos = {f"IMG_{i}.JPG": payload(size + 100 * i, f"{tag}{i}") for i in range(count)}
    for name, data in photos.items():
        write(m.roll / name, data)
    (m.albums / "Shared").mkdir()
    for name in in_album:
        os.link(m.roll / name, m.albums / "Shared" / name)
    sync(m)
    return photos


def snapshots(m) -> list[str]:
    out = m.gateway.s3cmd("ls", f"s3://{m.bucket}/lib/snapshots/").stdout
    return sorted(line.split()[-1].rsplit("/", 1)[1] for line in out.splitlines() if ".db.zst" in line)


def recover(m, target, *extra) -> str:
    return run([ALBUMFS, "recover", "--remote", f"s3://{m.bucket}/lib", "--endpoint", m.gateway.endpoint, *extra, target],
               env={**os.environ, **m.keys}, text=True, timeout=300).stdout


def test_recover_gives_back_the_library_and_recover_at_an_older_one(library, mount_factory, tmp_path):
    """§ Surviving the machine, recover (must-hold 1 and 6): imports, albums made and renamed, a
    favorite, deletes and a restore, an update by rename-over; sync --wait; rm -rf of the store;
    `recover` gives the same tree, names, bytes, inodes shared by album entries, favorite and
    Recently Deleted. `recover --at` the first snapshot gives the albums as they were then."""
    m = library
    photos = {f"IMG_{i}.JPG": payload(30_000 + 1_000 * i, f"r{i}") for i in range(6)}
    for name, data in photos.items():
        write(m.roll / name, data)
    (m.albums / "Trips").mkdir()
    (m.albums / "Trips" / "Rome").mkdir()
    (m.albums / "Old").mkdir()
    os.link(m.roll / "IMG_1.JPG", m.albums / "Trips" / "IMG_1.JPG")
    os.link(m.roll / "IMG_2.JPG", m.albums / "Trips" / "Rome" / "colosseum.jpg")
    os.link(m.roll / "IMG_3.JPG", m.albums / "Old" / "IMG_3.JPG")
    os.link(m.roll / "IMG_2.JPG", m.mp / "Smart Albums" / "Favorites" / "IMG_2.JPG")
    os.rename(m.albums / "Trips", m.albums / "Travel")
    os.unlink(m.roll / "IMG_4.JPG")
    os.unlink(m.roll / "IMG_5.JPG")
    os.rename(m.mp / "Recently Deleted" / "IMG_5.JPG", m.roll / "IMG_5.JPG")
    write(m.roll / ".IMG_0.JPG.tmp", payload(45_000, "edited"))
    os.rename(m.roll / ".IMG_0.JPG.tmp", m.roll / "IMG_0.JPG")
    # The facts first: read (and committed) while a snapshot is copied, they are in none yet and
    # take another (a snapshot or two, both of this state).
    index_wait(m.mp)
    sync(m)
    first = listing(m.mp)
    assert first["Albums/Travel/Rome/colosseum.jpg"][0] == first["Camera Roll/IMG_2.JPG"][0]
    assert first["Camera Roll/IMG_2.JPG"][3] == "1" and "Recently Deleted/IMG_4.JPG" in first
    taken = snapshots(m)
    assert taken
    shutil.rmtree(m.albums / "Old")
    os.rename(m.albums / "Travel", m.albums / "Journeys")
    sync(m)
    second = listing(m.mp)
    assert len(snapshots(m)) > len(taken)
    m.unmount()
    shutil.rmtree(m.store_path)

    out = recover(m, tmp_path / "recovered")
    assert "recovered" in out and "0 of them uploaded after it" in out, out
    again = mount_factory("again", store=tmp_path / "recovered", env=m.keys)
    assert listing(again.mp) == second
    assert os.getxattr(again.roll / "IMG_3.JPG", "user.albumfs.storage") == b"both", "a read brings the original back"
    again.unmount()

    stamp = taken[-1].split(".")[0]
    # (To the millisecond: both snapshots may be of one second.)
    at = f"{stamp[0:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:{stamp[11:13]}:{stamp[13:15]}.{stamp[15:18]}Z"
    recover(m, tmp_path / "older", "--at", at)
    older = mount_factory("older", store=tmp_path / "older", env=m.keys)
    assert listing(older.mp) == first


def test_uploads_after_the_last_snapshot_come_back_in_their_albums(library, mount_factory, tmp_path):
    """§ Surviving the machine, companions (must-hold 2): after a snapshot, 20 more photos copied
    into an album are uploaded (the uploads counted down to 0), and the daemon is SIGKILLed before
    the next snapshot (due a minute after the last change); the store is deleted. `recover` gives
    all 20 back, in the roll and in their album, with their bytes (mounted with -o take_over: the
    dead machine's lease has not run out yet)."""
    m = library
    write(m.roll / "before.jpg", payload(20_000, "before"))
    (m.albums / "Party").mkdir()
    index_wait(m.mp)   # (facts committed during a snapshot's copy would take another: see above)
    sync(m)
    taken = snapshots(m)
    assert taken
    later = {f"party {i:02}.jpg": payload(10_000 + 37 * i, f"party{i}") for i in range(20)}
    for name, data in later.items():
        write(m.albums / "Party" / name, data)
    deadline = time.monotonic() + SYNC_TIMEOUT
    while int(os.getxattr(m.mp, "user.albumfs.uploading")) and time.monotonic() < deadline:
        time.sleep(0.05)   # uploads are eventual; the count is the event (it does not ask for a snapshot)
    assert int(os.getxattr(m.mp, "user.albumfs.uploading")) == 0
    assert snapshots(m) == taken, "a snapshot was taken: the test would not test the companions"
    m.kill()
    shutil.rmtree(m.store_path)

    out = recover(m, tmp_path / "recovered")
    assert "20 of them uploaded after it" in out, out
    # The dead machine's lease still runs (a minute): the machine is gone, so take it over.
    again = mount_factory("again", store=tmp_path / "recovered", env=m.keys, options=["take_over"])
    assert sorted(os.listdir(again.albums / "Party")) == sorted(later)
    for name, data in later.items():
        assert (again.roll / name).read_bytes() == data
        assert os.stat(again.roll / name).st_ino == os.stat(again.albums / "Party" / name).st_ino


def test_a_second_device_browses_the_last_snapshot_read_only(library, mount_factory, tmp_path):
    """§ Surviving the machine, a second device (must-hold 5): `albumfs mount --remote … -o ro`
    with only a cache directory lists what the writer had at its last snapshot (names, sizes,
    inodes, favorites), reads the originals from the bucket, and refuses every change with EROFS;
    the writer's later snapshot shows after a remount."""
    import errno
    m = library
    photos = imported_with_album(m, 4, 25_000, "m", ("IMG_1.JPG",))
    writer = listing(m.mp)
    remote = ["--remote", f"s3://{m.bucket}/lib", "--endpoint", m.gateway.endpoint]
    mirror = mount_factory("mirror", store=tmp_path / "cache", make_store=False, env=m.keys, start=False)
    mirror.start(["ro"], flags=remote)
    assert listing(mirror.mp) == writer
    for name, data in photos.items():
        assert (mirror.roll / name).read_bytes() == data
    refusals = {
        "create": lambda: open(mirror.roll / "new.jpg", "wb"),
        "write": lambda: open(mirror.roll / "IMG_0.JPG", "r+b"),
        "mkdir": lambda: os.mkdir(mirror.albums / "New"),
        "unlink": lambda: os.unlink(mirror.roll / "IMG_2.JPG"),
        "rename": lambda: os.rename(mirror.roll / "IMG_2.JPG", mirror.roll / "x.jpg"),
        "link": lambda: os.link(mirror.roll / "IMG_2.JPG", mirror.albums / "Shared" / "IMG_2.JPG"),
        "setxattr": lambda: os.setxattr(mirror.roll / "IMG_2.JPG", "user.note", b"x"),
    }
    for what, change in refusals.items():
        with pytest.raises(OSError) as refused:
            change()
        assert refused.value.errno == errno.EROFS, f"{what}: {refused.value}"
    assert listing(mirror.mp) == writer, "a refused change changed something"

    (m.albums / "Later").mkdir()
    os.link(m.roll / "IMG_3.JPG", m.albums / "Later" / "IMG_3.JPG")
    sync(m)
    assert "Albums/Later" not in listing(mirror.mp), "the mirror shows the snapshot it was mounted with"
    mirror.unmount()
    mirror.start(["ro"], flags=remote)
    assert listing(mirror.mp) == listing(m.mp)


def test_refresh_shows_the_newest_snapshot_at_once(library, mount_factory, tmp_path):
    """§ Surviving the machine, a second device: `albumfs refresh MNT` takes the writer's newer
    snapshot while mounted. When it returns, every path shows it, though the kernel had the old
    names, listings and attributes cached (an import, an album renamed, an entry unlinked, a
    delete, a favorite, an update by rename-over); an original already read stays cached unless
    its object changed (the updated one reads its new bytes). A second refresh changes nothing;
    the writer's own mount has nothing to refresh."""
    m = library
    imported_with_album(m, 5, 20_000, "f", ("IMG_1.JPG", "IMG_2.JPG"))
    remote = ["--remote", f"s3://{m.bucket}/lib", "--endpoint", m.gateway.endpoint]
    mirror = mount_factory("mirror", store=tmp_path / "cache", make_store=False, env=m.keys, start=False)
    mirror.start(["ro"], flags=remote)
    assert listing(mirror.mp) == listing(m.mp)   # every name, listing and original now in the caches
    assert os.getxattr(mirror.roll / "IMG_1.JPG", "user.albumfs.storage") == b"both"

    write(m.roll / "IMG_5.JPG", payload(26_000, "f5"))
    os.link(m.roll / "IMG_5.JPG", m.albums / "Shared" / "IMG_5.JPG")
    os.unlink(m.albums / "Shared" / "IMG_2.JPG")
    os.rename(m.albums / "Shared", m.albums / "Trip")
    os.unlink(m.roll / "IMG_3.JPG")
    os.link(m.roll / "IMG_4.JPG", m.mp / "Smart Albums" / "Favorites" / "IMG_4.JPG")
    write(m.roll / ".IMG_0.JPG.tmp", payload(31_000, "edited"))
    os.rename(m.roll / ".IMG_0.JPG.tmp", m.roll / "IMG_0.JPG")
    sync(m)
    writer = listing(m.mp)
    assert "Albums/Shared" in listing(mirror.mp), "the mirror shows the snapshot it holds until a refresh"

    out = run([ALBUMFS, "refresh", mirror.mp], text=True, timeout=120).stdout
    assert out.startswith("refreshed: "), out
    # (Before the listing, which reads every original.)
    assert os.getxattr(mirror.roll / "IMG_1.JPG", "user.albumfs.storage") == b"both", "an unchanged original stays cached"
    assert os.getxattr(mirror.roll / "IMG_0.JPG", "user.albumfs.storage") == b"remote", "an updated one is fetched anew"
    assert listing(mirror.mp) == writer
    assert (mirror.roll / "IMG_0.JPG").read_bytes() == payload(31_000, "edited")

    again = run([ALBUMFS, "refresh", mirror.mp], text=True, timeout=120).stdout
    assert again.startswith("unchanged: "), again
    own = subprocess.run([ALBUMFS, "refresh", m.mp], capture_output=True, text=True, timeout=60)
    assert own.returncode == 2 and "not a second device" in own.stderr, own


def test_a_second_device_shows_the_writers_thumbnails_without_fetching_an_original(library, mount_factory, tmp_path):
    """§ Thumbnails, in the bucket; § Surviving the machine, a second device: the writer stores
    each photo's thumbnail beside its original (eventual: `user.albumfs.thumbnailing` counts those
    still to go), its next snapshot records their SHA-256, and a listing on a second device puts
    them in its user's thumbnail cache, written by albumfs, with every original still only in the
    bucket. A thumbnail that is not the recorded one is not used."""
    from test_thumbnails import photo, variant
    m = library
    base = photo(tmp_path / "p.jpg", size="800x600")
    for i in range(3):
        write(m.roll / f"IMG_{i}.JPG", variant(base, i))
    index_wait(m.mp)
    sync(m)
    deadline = time.monotonic() + SYNC_TIMEOUT
    while os.getxattr(m.mp, "user.albumfs.thumbnailing") != b"0":
        assert time.monotonic() < deadline, "the thumbnails did not reach the bucket"
        time.sleep(0.1)
    sync(m)   # a snapshot that records them
    stored = [line.split()[-1] for line in m.gateway.s3cmd("ls", "-r", f"s3://{m.bucket}/lib/thumbnails/").stdout.splitlines()]
    assert len(stored) == 3 and all(key.endswith(".png") for key in stored), stored
    # One of them replaced in the bucket by other bytes: the second device must not use it.
    forged = tmp_path / "forged.png"
    forged.write_bytes(photo(tmp_path / "other.jpg", colour="green"))
    m.gateway.s3cmd("put", forged, stored[0])

    remote = ["--remote", f"s3://{m.bucket}/lib", "--endpoint", m.gateway.endpoint]
    mirror = mount_factory("mirror", store=tmp_path / "cache", make_store=False, env=m.keys, start=False)
    mirror.start(["ro"], flags=remote)
    os.listdir(mirror.roll)
    large = mirror.thumbnail_home / "thumbnails" / "large"
    written = sorted(large.glob("*.png")) if large.exists() else []
    assert len(written) == 2, f"{len(written)} thumbnails written, not the 2 whose bytes are the recorded ones"
    from test_thumbnails import written_by
    assert all(written_by(p) == "albumfs" for p in written)
    for i in range(3):
        assert os.getxattr(mirror.roll / f"IMG_{i}.JPG", "user.albumfs.storage") == b"remote", "an original was fetched"
    log = (mirror.base / "albumfs.log").read_text()
    assert "is not the one recorded; not used" in log, log
