"""SEMANTICS.md § Remote storage: a store whose originals also go to an S3 bucket, against a
real RADOS Gateway on loopback (objectstore.py starts one for this module and stops it by pid).
What the bucket holds is read back with s3cmd, an S3 client that is not albumfs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from albumfs_testlib import ALBUMFS, REPO_ROOT, names, payload, poll, run, sha256, write
from objectstore import running_object_store

SYNC_TIMEOUT = 120   # uploads are eventual; sync --wait is the event, this only its bound


@pytest.fixture(scope="module")
def gateway():
    with running_object_store() as store:
        yield store


@pytest.fixture
def remote_mount(gateway, mount_factory, tmp_path, request):
    """A store made with `albumfs init --remote` in a bucket of its own, mounted with the keys in
    the daemon's environment (never on a command line)."""
    bucket = "b" + format(abs(hash(request.node.name)) % 10**12, "x")
    keys = {"AWS_ACCESS_KEY_ID": gateway.access_key, "AWS_SECRET_ACCESS_KEY": gateway.secret_key}
    store = tmp_path / "m" / "store"
    store.parent.mkdir(parents=True)
    made = run([ALBUMFS, "init", "--remote", f"s3://{bucket}/lib", "--endpoint", gateway.endpoint, store],
               env={**os.environ, **keys}, text=True)
    assert "its originals also in" in made.stdout
    m = mount_factory("m", store=store, env=keys)
    m.bucket, m.keys, m.gateway = bucket, keys, gateway
    return m


def sync(m) -> None:
    run([ALBUMFS, "sync", "--wait", "--timeout", str(SYNC_TIMEOUT), m.mp], timeout=SYNC_TIMEOUT + 30)


def objects(m) -> dict[str, int]:
    """key -> size of every original under the store's prefix (objects/), as s3cmd lists them
    (the metadata's snapshots and the companions are SEMANTICS.md § Surviving the machine's)."""
    listing = m.gateway.s3cmd("ls", "-r", f"s3://{m.bucket}/lib/objects/").stdout
    found = {}
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[-1].startswith("s3://"):
            found[parts[-1].split(f"s3://{m.bucket}/lib/", 1)[1]] = int(parts[-2])
    return found


def fetched(m, key: str, tmp_path) -> bytes:
    out = tmp_path / "fetched"
    m.gateway.s3cmd("get", "--force", f"s3://{m.bucket}/lib/{key}", str(out))
    return out.read_bytes()


def storage(path) -> str:
    return os.getxattr(path, "user.albumfs.storage").decode()


def wait_storage(path, want: str) -> bool:
    """Whether `user.albumfs.storage` of `path` reads `want` within SYNC_TIMEOUT: for what the
    contract leaves to background work only (SEMANTICS.md § Remote storage: eviction once
    uploaded, a download's install once every chunk came, a pinned original's fetch)."""
    return poll(lambda: storage(path) == want, SYNC_TIMEOUT, 0.05)


def test_every_closed_photo_is_in_the_bucket_after_sync_wait(remote_mount, tmp_path):
    """cp of 30 photos (two of them identical) and sync --wait: one object per content, named by
    its SHA-256, with exactly those bytes; every photo reads `both`; nothing waits."""
    m = remote_mount
    photos = {f"IMG_{i:04d}.JPG": payload(50_000 + i * 997, f"p{i}") for i in range(29)}
    photos["twin.jpg"] = photos["IMG_0003.JPG"]
    for name, data in photos.items():
        write(m.roll / name, data)
    sync(m)
    assert os.getxattr(m.mp, "user.albumfs.uploading") == b"0"
    want = {f"objects/{sha256(d)[:2]}/{sha256(d)}": len(d) for d in photos.values()}
    assert objects(m) == want, "the bucket holds other objects than one per content"
    for key in list(want)[:5]:
        assert sha256(fetched(m, key, tmp_path)) == key.rsplit("/", 1)[1]
    assert {storage(m.roll / name) for name in photos} == {"both"}
    stats = json.loads(run([ALBUMFS, "stats", "--json", m.mp], text=True).stdout)
    assert stats["remote"].startswith(f"s3://{m.bucket}/lib")
    assert stats["uploads_pending"] == {"assets": 0, "bytes": 0, "oldest_queued": None} and stats["objects"] == len(want)
    assert stats["remote_only"] == {"assets": 0, "bytes": 0} and stats["last_remote_error"] is None


def test_an_upload_cut_by_a_killed_daemon_is_done_at_the_next_mount(remote_mount):
    """SIGKILL right after the copies closed (uploads queued, some under way): after a remount
    every photo is uploaded once, as one object each."""
    m = remote_mount
    photos = [payload(400_000, f"k{i}") for i in range(20)]
    for i, data in enumerate(photos):
        write(m.roll / f"k{i}.jpg", data)
    m.kill()
    m.start()
    sync(m)
    assert objects(m) == {f"objects/{sha256(d)[:2]}/{sha256(d)}": len(d) for d in photos}


def test_a_stalled_object_store_changes_nothing_a_user_does(remote_mount):
    """radosgw stopped dead (SIGSTOP: connections hang, nothing answers): listing, stat, copies,
    renames, links and deletes go on at local speed; the uploads wait, and go once it answers."""
    m = remote_mount
    write(m.roll / "before.jpg", payload(10_000, "before"))
    sync(m)
    rgw = m.gateway.pids["rgw.a"]
    os.kill(rgw, signal.SIGSTOP)
    try:
        started = time.monotonic()
        write(m.roll / "offline.jpg", payload(200_000, "offline"))
        (m.albums / "Trip").mkdir()
        os.link(m.roll / "offline.jpg", m.albums / "Trip" / "offline.jpg")
        os.rename(m.roll / "before.jpg", m.roll / "renamed.jpg")
        os.unlink(m.roll / "renamed.jpg")
        assert sorted(names(m.roll)) == ["offline.jpg"]
        assert storage(m.roll / "offline.jpg") == "uploading"
        # Not a speed check: an operation that waited on the stalled store would hang until SIGCONT
        # (or curl's 30 s stall bound); 20 s leaves a loaded machine all the room it needs.
        elapsed = time.monotonic() - started
        assert elapsed < 20, f"file operations took {elapsed:.1f} s with the object store stalled"
        assert os.getxattr(m.mp, "user.albumfs.uploading") == b"1"
    finally:
        os.kill(rgw, signal.SIGCONT)
    sync(m)
    assert storage(m.roll / "offline.jpg") == "both"


def test_a_purge_deletes_the_object_only_when_no_twin_needs_it(remote_mount):
    """rm from the roll, then from Recently Deleted (Empty Trash): the object goes once the last
    asset with that content is purged; eventual, so polled with a bound."""
    m = remote_mount
    data = payload(30_000, "twins")
    key = f"objects/{sha256(data)[:2]}/{sha256(data)}"
    write(m.roll / "a.jpg", data)
    write(m.roll / "b.jpg", data)
    sync(m)
    os.unlink(m.roll / "a.jpg")
    os.unlink(m.mp / "Recently Deleted" / "a.jpg")
    write(m.roll / "other.jpg", payload(1000, "other"))
    sync(m)   # the worker ran past the purge's step
    assert key in objects(m), "an object its twin still needs was deleted"
    os.unlink(m.roll / "b.jpg")
    os.unlink(m.mp / "Recently Deleted" / "b.jpg")
    # The object's delete is background work (SEMANTICS.md § Remote storage, purges): eventual.
    assert poll(lambda: key not in objects(m), SYNC_TIMEOUT, 0.2), "the last twin's purge left its object"


def test_a_store_with_a_remote_is_not_mounted_without_keys(remote_mount, tmp_path):
    """No keys in the environment or ~/.aws/credentials: the mount is refused with exit 3 and
    the one line that says where they go; nothing is mounted."""
    m = remote_mount
    m.unmount()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = str(tmp_path)   # no ~/.aws/credentials there
    p = subprocess.run([ALBUMFS, "mount", "--store", m.store, m.mp], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert "needs keys" in p.stderr and "AWS_ACCESS_KEY_ID" in p.stderr
    assert os.listdir(m.mp) == [], "something is mounted"


def du(path, *flags) -> int:
    return int(run(["du", "-s", "--block-size=1", *flags, path], text=True).stdout.split()[0])


def test_a_bounded_cache_evicts_what_the_bucket_holds_and_an_open_fetches_it(remote_mount, tmp_path):
    """-o cache_size=1M with 8 MiB of photos: after sync --wait the local copies are evicted (du
    shrinks, du --apparent-size and stat keep the library's size), storage says remote, and
    reading a photo back fetches it: the same SHA-256; pinned with user.albumfs.keep it stays."""
    m = remote_mount
    photos = {f"v{i}.jpg": payload(1 << 20, f"v{i}") for i in range(8)}
    for name, data in photos.items():
        write(m.roll / name, data)
    sync(m)
    m.unmount()
    m.start(["cache_size=1M"])
    # Evicted once uploaded (SEMANTICS.md § Remote storage, cache_size): background work.
    assert poll(lambda: du(m.roll) <= 2 << 20, SYNC_TIMEOUT, 0.2), f"du of the roll is {du(m.roll)} bytes with cache_size=1M"
    assert du(m.roll, "--apparent-size") >= 8 << 20
    remote_only = [name for name in photos if storage(m.roll / name) == "remote"]
    assert len(remote_only) >= 6
    name = remote_only[0]
    assert os.stat(m.roll / name).st_size == 1 << 20 and os.stat(m.roll / name).st_blocks == 0
    assert sha256(m.roll / name) == sha256(photos[name])
    # Fetched (installed once every chunk came; the bound may evict it again later).
    assert storage(m.roll / name) in ("downloading", "both", "remote")
    pinned = remote_only[1]
    os.setxattr(m.roll / pinned, "user.albumfs.keep", b"1")
    assert os.getxattr(m.roll / pinned, "user.albumfs.keep") == b"1"
    # Pinning starts the fetch and returns (SEMANTICS.md § Remote storage): eventual.
    assert wait_storage(m.roll / pinned, "both"), storage(m.roll / pinned)
    assert sha256(m.roll / pinned) == sha256(photos[pinned])
    m.unmount()
    run([ALBUMFS, "fsck", "--store", m.store])


def test_fsck_remote_finds_an_overwritten_and_a_missing_object_and_repairs_from_local_copies(remote_mount, tmp_path):
    """SEMANTICS.md § Remote storage, "Checking the bucket": `fsck --remote` is clean after
    sync --wait; an object overwritten behind albumfs's back with as many bytes (s3cmd), and one
    deleted, are reported with the photo's name (exit 1) and put back by --repair from the local
    copies; an object no asset needs is listed and never deleted. Keys as the mount finds them."""
    m = remote_mount
    photos = {f"p{i}.jpg": payload(50_000, f"fsck{i}") for i in range(4)}
    for name, data in photos.items():
        write(m.roll / name, data)
    sync(m)
    m.unmount()
    env = {**os.environ, **m.keys}

    def fsck(*flags):
        return subprocess.run([ALBUMFS, "fsck", "--remote", "--store", m.store, *flags], env=env,
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)

    clean = fsck()
    assert clean.returncode == 0 and "the bucket holds all 4 objects as recorded" in clean.stdout, clean
    key = lambda name: f"objects/{sha256(photos[name])[:2]}/{sha256(photos[name])}"   # noqa: E731
    lie = tmp_path / "lie"
    lie.write_bytes(payload(50_000, "not the photo"))
    m.gateway.s3cmd("put", str(lie), f"s3://{m.bucket}/lib/{key('p0.jpg')}")
    m.gateway.s3cmd("del", f"s3://{m.bucket}/lib/{key('p1.jpg')}")
    stranger = tmp_path / "stranger"
    stranger.write_bytes(b"a photo of another library")
    stranger_key = f"objects/{sha256(stranger.read_bytes())[:2]}/{sha256(stranger.read_bytes())}"
    m.gateway.s3cmd("put", str(stranger), f"s3://{m.bucket}/lib/{stranger_key}")

    found = fsck()
    assert found.returncode == 1, found
    lines = found.stdout.splitlines()
    assert any("p0.jpg" in line and "overwritten" in line and "would upload it again" in line for line in lines), lines
    assert any("p1.jpg" in line and "is missing" in line for line in lines), lines
    assert any(sha256(stranger.read_bytes()) in line and "not repaired" in line for line in lines), lines
    assert fetched(m, key("p0.jpg"), tmp_path) != photos["p0.jpg"], "fsck without --repair changed the bucket"

    repaired = fsck("--repair")
    assert repaired.returncode == 1 and "repaired: upload it again" in repaired.stdout, repaired
    assert fetched(m, key("p0.jpg"), tmp_path) == photos["p0.jpg"]
    assert fetched(m, key("p1.jpg"), tmp_path) == photos["p1.jpg"]
    assert stranger_key in objects(m), "fsck deleted an object it does not know"
    after = fsck()
    assert after.returncode == 1 and len(after.stdout.splitlines()) == 2, after   # the stranger, and the total
    m.gateway.s3cmd("del", f"s3://{m.bucket}/lib/{stranger_key}")
    assert fsck().returncode == 0


def test_unmount_with_uploads_waiting_says_so_and_they_resume_at_the_next_mount(remote_mount):
    """SEMANTICS.md § Remote storage: `albumfs unmount` while uploads wait (radosgw stopped dead)
    unmounts, says how many wait and that they resume (exit 0); the next mount uploads them."""
    m = remote_mount
    photos = {f"w{i}.jpg": payload(100_000, f"wait{i}") for i in range(3)}
    rgw = m.gateway.pids["rgw.a"]
    os.kill(rgw, signal.SIGSTOP)
    try:
        for name, data in photos.items():
            write(m.roll / name, data)
        m.expect_mounted = False
        p = subprocess.run([ALBUMFS, "unmount", m.mp], capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        assert p.returncode == 0, p
        assert "3 uploads to the bucket waiting" in p.stderr and "resume at its next mount" in p.stderr, p.stderr
        assert m.wait_exit(30)
    finally:
        os.kill(rgw, signal.SIGCONT)
    m.start()
    sync(m)
    assert {f"objects/{sha256(d)[:2]}/{sha256(d)}" for d in photos.values()} <= set(objects(m))


def test_remote_attach_uploads_an_existing_library_and_refuses_a_mounted_one(gateway, mount_factory, tmp_path):
    """SEMANTICS.md § Remote storage: `albumfs remote attach` gives a library that had no remote
    one and uploads every original before it returns (a progress line on a terminal); refused
    while the store is mounted, with nothing changed; a second attach to the same bucket finds
    nothing to do. The objects are read back with s3cmd."""
    m = mount_factory("plain")
    photos = {f"a{i}.jpg": payload(70_000, f"attach{i}") for i in range(6)}
    for name, data in photos.items():
        write(m.roll / name, data)
    keys = {"AWS_ACCESS_KEY_ID": gateway.access_key, "AWS_SECRET_ACCESS_KEY": gateway.secret_key}
    env = {**os.environ, **keys}
    attach = [ALBUMFS, "remote", "attach", "s3://attached/lib", "--endpoint", gateway.endpoint, "--store", m.store]
    refused = subprocess.run(attach, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert refused.returncode == 3 and "mounted" in refused.stderr, refused
    m.unmount()
    stats = json.loads(run([ALBUMFS, "stats", "--json", "--store", m.store], text=True).stdout)
    assert stats["remote"] is None, "a refused attach changed the store"
    done = subprocess.run(attach, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and "every original is in s3://attached/lib (6 uploaded)" in done.stdout, done
    listing = gateway.s3cmd("ls", "-r", "s3://attached/lib/objects/").stdout
    assert {line.split()[-1].rsplit("/", 1)[1] for line in listing.splitlines() if "s3://" in line} == \
        {sha256(d) for d in photos.values()}
    again = subprocess.run(attach, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert again.returncode == 0 and "(0 uploaded)" in again.stdout, again


def test_a_generated_remote_only_store_lists_stats_and_reads_like_one_uploaded(gateway, mount_factory, tmp_path):
    """The scale bench's remote-only library (`scripts/make-store --remote-only`, SEMANTICS.md
    § Remote storage): every asset recorded in the bucket and evicted, no content file. It passes
    fsck; mounted, each photo is `remote` with its size and no local blocks; once its one object
    (the assets are all 8 MiB of zeros) is in the bucket, put there by s3cmd, a read fetches and
    checks it chunk by chunk (so the digests make-store recorded are right), and fsck --remote
    is clean."""
    size = 8 << 20
    keys = {"AWS_ACCESS_KEY_ID": gateway.access_key, "AWS_SECRET_ACCESS_KEY": gateway.secret_key}
    m = mount_factory("gen", start=False, env=keys)
    made = run([REPO_ROOT / "scripts" / "make-store", m.store, "--assets", "50", "--album-size", "10",
                "--size", str(size), "--remote-only", "s3://generated/lib", "--endpoint", gateway.endpoint],
               env={**os.environ, "ALBUMFS_BIN": os.fspath(ALBUMFS)}, text=True)
    assert "all only in s3://generated/lib" in made.stdout, made.stdout
    p = run([ALBUMFS, "fsck", "--store", m.store], text=True, check=False)
    assert p.returncode == 0 and "consistent" in p.stdout, f"fsck: exit {p.returncode}\n{p.stdout}{p.stderr}"
    m.start()
    first = m.albums / "Big" / "IMG_0000000.JPG"
    assert len(names(m.roll)) == 50
    assert {storage(m.roll / n) for n in names(m.roll)} == {"remote"}
    assert os.stat(first).st_size == size and os.stat(first).st_blocks == 0
    zeros = tmp_path / "zeros"
    zeros.write_bytes(bytes(size))
    gateway.s3cmd("mb", "s3://generated")
    gateway.s3cmd("put", str(zeros), f"s3://generated/lib/objects/{sha256(bytes(size))[:2]}/{sha256(bytes(size))}")
    assert first.read_bytes() == bytes(size)
    m.unmount()
    checked = subprocess.run([ALBUMFS, "fsck", "--remote", "--store", m.store], env={**os.environ, **keys},
                             capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_second_open_while_the_first_reads_a_fetched_original_reads_it(remote_mount):
    """SEMANTICS.md § Remote storage, "Reading a remote-only original": a handle opened while the
    data arrives is served by the daemon (its reads wait for their bytes). Once the data is
    installed, a second open of the same file while the first is still open must read it too.
    The kernel refuses (EIO) a passthrough open of a file that a handle it caches for has open,
    so that second handle must be served the first one's way: it was EIO (test_remote_crash's
    reads after a remount, about 1 run in 5)."""
    m = remote_mount
    photo = payload(256 << 10, "x")
    write(m.roll / "x.jpg", photo)
    for i in range(4):
        write(m.roll / f"v{i}.jpg", payload(1 << 20, f"v{i}"))
    sync(m)
    m.unmount()
    m.start(["cache_size=1M"])
    # Evicted once uploaded (background work, like the install below).
    assert wait_storage(m.roll / "x.jpg", "remote"), storage(m.roll / "x.jpg")
    with open(m.roll / "x.jpg", "rb", buffering=0) as first:
        # Installed once every chunk came (its opener reads nothing meanwhile); an open file is never evicted.
        assert wait_storage(m.roll / "x.jpg", "both"), storage(m.roll / "x.jpg")
        with open(m.roll / "x.jpg", "rb", buffering=0) as second:
            assert second.read() == photo
        assert first.read() == photo
    # Both closed: the next open is served as any local file's.
    assert sha256(m.roll / "x.jpg") == sha256(photo)
