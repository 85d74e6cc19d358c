"""SEMANTICS.md § "Remote storage: originals in an S3 bucket", with the object store misbehaving:
albumfs talks to a real RADOS Gateway on loopback through faultproxy.py's FaultProxy, which
resets connections mid-PUT and mid-GET, answers 503 SlowDown, stalls responses and goes offline.
None of that changes the contract: every file operation goes on at local speed, reading a
remote-only original fails with EIO within `remote_timeout` (a failed download fails its readers
and the next open starts another; never a wrong byte), new photos queue, and once the store is
healthy the queue drains and nothing is lost.

The store is made with `albumfs init --remote s3://BUCKET/lib --endpoint PROXY`: every request
of the daemon goes through the proxy (which forwards the Host header as signed). What the bucket
holds is read back with s3cmd straight from radosgw, not through the proxy and not with albumfs."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import threading
import time
from typing import Callable, Iterator

import pytest

from albumfs_testlib import ALBUMFS, index_wait, names, payload, poll, run, sha256, write
from faultproxy import FaultProxy
from objectstore import running_object_store
from test_remote import SYNC_TIMEOUT, du, fetched, objects, storage, sync

OP_BOUND = 20   # s: not a speed check; a file operation that waited on the store would hang far longer
                # (until release, or curl's 30 s stall bound); 20 s leaves a loaded machine room


@pytest.fixture(scope="module")
def gateway():
    with running_object_store() as store:
        yield store


@pytest.fixture
def proxy(gateway) -> Iterator[FaultProxy]:
    """A fault proxy in front of the module's radosgw; closed after the test's mounts are gone
    (requested before mount_factory, so torn down after it)."""
    with FaultProxy(gateway.host, gateway.port) as p:
        yield p


@pytest.fixture
def remote_mount(gateway, proxy, mount_factory, tmp_path, request):
    """As test_remote's remote_mount, but the store's endpoint is the proxy: a store made with
    `albumfs init --remote s3://BUCKET/lib --endpoint PROXY`, mounted with the keys in the
    daemon's environment."""
    bucket = "f" + hashlib.sha256(request.node.name.encode()).hexdigest()[:12]
    keys = {"AWS_ACCESS_KEY_ID": gateway.access_key, "AWS_SECRET_ACCESS_KEY": gateway.secret_key}
    store_dir = tmp_path / "m" / "store"
    store_dir.parent.mkdir(parents=True)
    made = run([ALBUMFS, "init", "--remote", f"s3://{bucket}/lib", "--endpoint", proxy.endpoint, store_dir],
               env={**os.environ, **keys}, text=True)
    assert "its originals also in" in made.stdout
    m = mount_factory("m", store=store_dir, env=keys)
    m.bucket, m.keys, m.gateway, m.proxy = bucket, keys, gateway, proxy
    return m


# --- helpers -------------------------------------------------------------------------------------


def key_of(data: bytes) -> str:
    digest = sha256(data)
    return f"objects/{digest[:2]}/{digest}"


def bounded(what: str, fn: Callable[[], object], seconds: float = OP_BOUND) -> object:
    """fn() in a thread of its own, which must finish within `seconds` (else the test fails; the
    mount's cleanup then breaks the stuck call loose). Its exception is raised here."""
    result: dict[str, object] = {}

    def body():
        try:
            result["value"] = fn()
        except BaseException as error:   # noqa: BLE001  (re-raised in the test's thread)
            result["error"] = error

    started = time.monotonic()
    thread = threading.Thread(target=body, name=f"bounded: {what}", daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{what} did not finish in {seconds} s while the object store misbehaved"
    if "error" in result:
        raise result["error"]
    result["elapsed"] = time.monotonic() - started
    return result.get("value")


def read_all(path) -> tuple[bytes, OSError | None]:
    """Every byte os.read gives, and the error that ended the reading (None at EOF)."""
    got = bytearray()
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as error:
        return bytes(got), error
    try:
        while True:
            piece = os.read(fd, 1 << 20)
            if not piece:
                return bytes(got), None
            got += piece
    except OSError as error:
        return bytes(got), error
    finally:
        os.close(fd)


def stats(m) -> dict:
    return json.loads(run([ALBUMFS, "stats", "--json", m.mp], text=True).stdout)


def uploading(m) -> int:
    return int(os.getxattr(m.mp, "user.albumfs.uploading"))


def assert_bucket_holds(m, photos: dict[str, bytes], tmp_path) -> None:
    """One object per content, named by its SHA-256, and nothing else under the prefix; each one
    read back with s3cmd (from radosgw itself) has exactly the photo's bytes."""
    want = {key_of(d): len(d) for d in photos.values()}
    assert objects(m) == want, "the bucket holds other objects than one per photo's content"
    for name, data in photos.items():
        assert sha256(fetched(m, key_of(data), tmp_path)) == sha256(data), f"the object of {name} has other bytes"


def evicted_library(m, photos: dict[str, bytes], options: list[str]) -> list[str]:
    """Write the photos, upload them (sync --wait), remount with `options` (cache_size=1M among
    them) and wait until the local copies are evicted; the names that are remote-only."""
    for name, data in photos.items():
        write(m.roll / name, data)
    sync(m)
    m.unmount()
    m.start(options)
    assert poll(lambda: du(m.roll) <= 2 << 20, SYNC_TIMEOUT, 0.2), \
        f"du of the roll is {du(m.roll)} bytes with cache_size=1M"
    remote_only = [name for name in photos if storage(m.roll / name) == "remote"]
    assert len(remote_only) >= 4, {name: storage(m.roll / name) for name in photos}
    return remote_only


# --- tests ---------------------------------------------------------------------------------------


def test_uploads_cut_mid_put_and_slowed_down_all_land_after_sync_wait(remote_mount, tmp_path):
    """SEMANTICS.md § Remote storage, "A failed upload is retried ... never dropped": the first 3
    PUTs of objects are reset after 64 KiB of their bodies, the next 2 get 503 SlowDown. 10 photos
    copied in; `albumfs sync --wait` returns 0; the bucket holds one object per photo with exactly
    its bytes (s3cmd), and no other (no partial object); the proxy saw every injected fault."""
    m, proxy = remote_mount, remote_mount.proxy
    proxy.reset_mid_request("PUT", after_bytes=64 << 10, path_contains="/lib/objects/", times=3)
    proxy.respond("PUT", status=503, code="SlowDown", path_contains="/lib/objects/", times=2)
    photos = {f"IMG_{i:04d}.JPG": payload(200_000 + i * 7919, f"put{i}") for i in range(10)}
    for name, data in photos.items():
        write(m.roll / name, data)
    sync(m)   # exit 0 within SYNC_TIMEOUT, or run() fails the test

    assert proxy.pending_faults == [], "not every injected fault was met: the test proved nothing"
    applied = proxy.applied_faults
    assert [kind for kind, _, _ in applied] == ["reset_mid_request"] * 3 + ["respond"] * 2, applied
    puts = [r for r in proxy.requests if r.method == "PUT" and "/lib/objects/" in r.path]
    assert sum(r.status == "fault" for r in puts) == 3 and sum(r.status == 503 for r in puts) == 2, puts
    assert sum(r.status == 200 for r in puts) >= len(photos), puts

    assert uploading(m) == 0
    assert_bucket_holds(m, photos, tmp_path)
    assert {storage(m.roll / name) for name in photos} == {"both"}
    # The failures are over: stats stops showing the last one (written just after the last step).
    assert poll(lambda: stats(m)["last_remote_error"] is None, 10), stats(m)
    assert stats(m)["uploads_pending"]["assets"] == 0


def test_a_download_reset_mid_get_fails_its_reader_with_eio_and_the_next_open_gets_the_photo(remote_mount):
    """SEMANTICS.md § Remote storage, "Reading a remote-only original": the GET of an evicted
    photo's object is reset after 64 KiB of its body. A lost connection fails the download: the
    reader gets EIO (no byte that is not the photo's), and the next open starts another
    download, which reads back the photo's SHA-256."""
    m, proxy = remote_mount, remote_mount.proxy
    photos = {f"v{i}.jpg": payload(1 << 20, f"get{i}") for i in range(8)}
    remote_only = evicted_library(m, photos, ["cache_size=1M"])
    name = remote_only[0]
    key = key_of(photos[name])
    proxy.reset_mid_response("GET", after_bytes=64 << 10, path_contains=key, times=1)

    got, error = bounded(f"reading {name}", lambda: read_all(m.roll / name))
    assert error is not None, "a download whose connection was reset mid-GET gave the whole photo"
    assert error.errno == errno.EIO, f"got {errno.errorcode.get(error.errno)} ({error}), want EIO"
    assert got == photos[name][:len(got)], "a reader got bytes that are not the photo's"
    assert proxy.applied_faults == [("reset_mid_response", "GET", proxy.applied_faults[0][2])]
    assert key in proxy.applied_faults[0][2]
    assert [r.status for r in proxy.requests if r.method == "GET" and key in r.path] == ["fault"]

    # The fault is used up: the next open starts another download, and it is the photo.
    got, error = bounded(f"reading {name} again", lambda: read_all(m.roll / name))
    assert error is None, f"the open after a failed download failed too: {error}"
    assert sha256(got) == sha256(photos[name])
    assert proxy.count("GET", path_contains=key) >= 2
    # Another remote-only photo, never faulted, reads back too (the fetcher's connection was reset).
    other = remote_only[1]
    assert sha256(m.roll / other) == sha256(photos[other])


@pytest.mark.mount_timeout(240)
def test_a_stalled_get_is_eio_within_remote_timeout_and_nothing_else_waits(remote_mount, tmp_path):
    """SEMANTICS.md § Remote storage: with every GET's response held before its headers and
    `-o remote_timeout=2`, reading a remote-only photo fails with EIO within the bound (not a
    hang), while ls -l, stat, mkdir of an album, ln into it, mv, a new copy and the read of a
    local original each complete promptly. Once the store answers again the photo reads back."""
    m, proxy = remote_mount, remote_mount.proxy
    photos = {f"s{i}.jpg": payload(1 << 20, f"stall{i}") for i in range(8)}
    remote_only = evicted_library(m, photos, ["cache_size=1M", "remote_timeout=2"])
    target, linked, moved = remote_only[:3]
    proxy.stall("GET", before="headers", path_contains="/lib/objects/", times=1000)

    outcome: dict[str, object] = {}

    def reader():
        started = time.monotonic()
        outcome["got"], outcome["error"] = read_all(m.roll / target)
        outcome["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=reader, name="stalled reader", daemon=True)
    thread.start()
    try:
        proxy.wait_until(lambda: proxy.stalled >= 1, timeout=OP_BOUND)

        # Everything else, while the store holds the download's response.
        listing = bounded("ls -l", lambda: run(["ls", "-l", m.roll], text=True, timeout=OP_BOUND).stdout)
        assert all(name in listing for name in photos), listing
        st = bounded(f"stat {target}", lambda: os.stat(m.roll / target))
        assert st.st_size == 1 << 20
        bounded("mkdir Albums/Trip", lambda: (m.albums / "Trip").mkdir())
        bounded(f"ln {linked} Albums/Trip", lambda: os.link(m.roll / linked, m.albums / "Trip" / linked))
        bounded(f"mv {moved}", lambda: os.rename(m.roll / moved, m.roll / "moved.jpg"))
        new = payload(300_000, "new while stalled")
        source = tmp_path / "new.jpg"
        source.write_bytes(new)
        bounded("cp new.jpg", lambda: run(["cp", source, m.roll / "new.jpg"], timeout=OP_BOUND))
        assert bounded("reading the new, local photo", lambda: sha256(m.roll / "new.jpg")) == sha256(new)
        assert names(m.albums / "Trip") == [linked]
        assert "moved.jpg" in names(m.roll) and moved not in names(m.roll)
    finally:
        thread.join(OP_BOUND)
    assert not thread.is_alive(), f"a read of a remote-only photo hung for {OP_BOUND} s with remote_timeout=2"
    error = outcome["error"]
    assert error is not None, "the read of a remote-only photo succeeded while every GET was stalled"
    assert error.errno == errno.EIO, f"got {errno.errorcode.get(error.errno)} ({error}), want EIO"
    assert outcome["elapsed"] < OP_BOUND, f"EIO came after {outcome['elapsed']:.1f} s with remote_timeout=2"
    assert outcome["got"] == b"", "bytes came although no response did"

    # The store answers again: the next open fetches the photo.
    proxy.clear_faults()
    proxy.release()
    got, error = bounded(f"reading {target} after the release", lambda: read_all(m.roll / target))
    assert error is None, f"the read after the store answered again failed: {error}"
    assert sha256(got) == sha256(photos[target])
    sync(m)
    assert key_of(new) in objects(m), "the photo copied in while GETs stalled was not uploaded"


def test_an_offline_store_queues_new_photos_and_the_queue_drains_when_it_is_back(remote_mount, tmp_path):
    """SEMANTICS.md § Remote storage, "Unreachable ... uploads wait and resume": the proxy goes
    offline (every connection reset, the ones under way too) right after 6 photos are copied in;
    3 more are copied in while it is offline. Copies, listing, stat, mkdir, ln, mv and reads of
    local originals go on promptly; the root's user.albumfs.uploading counts the queue and stats
    shows the failure. Back online, `sync --wait` drains the queue: every photo's object is in
    the bucket with its bytes (s3cmd), and nothing else. (Not woken by anything after online():
    the uploader's own retry drains it. Its pause doubles from a second and photos closed while
    offline do not cut it short, so it stays near the outage's length, never the minute a burst
    of retries would have grown it to.)"""
    m, proxy = remote_mount, remote_mount.proxy
    before = {f"b{i}.jpg": payload(1 << 20, f"before{i}") for i in range(6)}
    offline = {f"o{i}.jpg": payload(500_000 + i, f"offline{i}") for i in range(3)}
    for name, data in before.items():
        write(m.roll / name, data)
    # Offline while the uploads are under way: after the first object went up, with the rest queued.
    proxy.wait_until(lambda: any(r.method == "PUT" and "/lib/objects/" in r.path and r.status == 200
                                 for r in proxy.requests), timeout=OP_BOUND)
    proxy.offline()
    went = time.monotonic()
    try:
        for name, data in offline.items():
            bounded(f"copying {name} in", lambda name=name, data=data: write(m.roll / name, data))
        assert uploading(m) >= len(offline)
        assert {storage(m.roll / name) for name in offline} == {"uploading"}
        listing = bounded("ls -l", lambda: run(["ls", "-l", m.roll], text=True, timeout=OP_BOUND).stdout)
        assert all(name in listing for name in [*before, *offline]), listing
        bounded("stat", lambda: os.stat(m.roll / "o0.jpg"))
        bounded("mkdir Albums/Offline", lambda: (m.albums / "Offline").mkdir())
        bounded("ln", lambda: os.link(m.roll / "o1.jpg", m.albums / "Offline" / "o1.jpg"))
        bounded("mv", lambda: os.rename(m.roll / "b0.jpg", m.roll / "b0-renamed.jpg"))
        assert bounded("reading a local original", lambda: sha256(m.roll / "b1.jpg")) == sha256(before["b1.jpg"])
        assert names(m.albums / "Offline") == ["o1.jpg"]
        # The daemon did try the store (so the queue waits on a real failure, not an idle worker),
        # and says so in stats; both eventual, bounded.
        proxy.wait_until(lambda: proxy.refused >= 1, timeout=OP_BOUND)
        assert poll(lambda: stats(m)["last_remote_error"] is not None, OP_BOUND), stats(m)
        pending = stats(m)["uploads_pending"]
        assert pending["assets"] >= len(offline) and pending["bytes"] > 0, pending
        assert uploading(m) >= len(offline)
    finally:
        proxy.online()
        back = time.monotonic()

    sync(m)
    # Attempts at 0, 1, 3, 7, 15 ... s after the first failure: the first after online() comes
    # within the outage's length again (+ 1 s); 20 s more for the uploads on a loaded machine.
    outage, drained = back - went, time.monotonic() - back
    assert drained < outage + 20, \
        f"the queue drained {drained:.0f} s after an outage of {outage:.0f} s: a burst of retries grew the pause"
    assert uploading(m) == 0
    photos = {**before, **offline}
    assert_bucket_holds(m, photos, tmp_path)
    assert {storage(m.roll / name) for name in ["b0-renamed.jpg", *list(before)[1:], *offline]} == {"both"}
    assert poll(lambda: stats(m)["last_remote_error"] is None, 10), stats(m)


@pytest.mark.parametrize("point", ["body cut", "answer held"])
def test_a_kill_during_a_snapshot_upload_leaves_the_last_one_usable_and_the_next_completes(
        remote_mount, mount_factory, tmp_path, point):
    """SEMANTICS.md § Surviving the machine, snapshots (must-hold 3): the daemon is SIGKILLed while
    a snapshot goes up, at two seeded points: its PUT cut after 1 KiB of the body (the proxy resets
    it and holds the retry), or its PUT whole at radosgw and the answer held. The bucket then holds
    only whole snapshots (each one recover can use: the newest decompresses and is a store); the
    remount's snapshot completes; recover from it gives the remounted library's listing."""
    from test_recover import listing, snapshots
    m = remote_mount
    proxy = m.proxy
    write(m.roll / "a.jpg", payload(20_000, "a"))
    index_wait(m.mp)   # (facts committed during a snapshot's copy take another: test_recover.py)
    sync(m)
    before = snapshots(m)
    assert before
    (m.albums / "Trip").mkdir()
    os.link(m.roll / "a.jpg", m.albums / "Trip" / "a.jpg")
    if point == "body cut":
        proxy.reset_mid_request("PUT", after_bytes=1024, path_contains="/snapshots/")
        proxy.stall("PUT", path_contains="/snapshots/", times=100)
        os.getxattr(m.mp, "user.albumfs.snapshotting")   # asks for the snapshot now
        proxy.wait_until(lambda: proxy.stalled >= 1, timeout=60)
    else:
        proxy.stall("PUT", path_contains="/snapshots/", times=100)
        os.getxattr(m.mp, "user.albumfs.snapshotting")
        proxy.wait_until(lambda: proxy.stalled >= 1, timeout=60)
    m.kill()
    proxy.clear_faults()
    proxy.release()
    held = snapshots(m)
    assert len(before) <= len(held) <= len(before) + 1, (before, held)
    recover_dir = tmp_path / f"r{len(held)}"
    out = run([ALBUMFS, "recover", "--remote", f"s3://{m.bucket}/lib", "--endpoint", m.gateway.endpoint, recover_dir],
              env={**os.environ, **m.keys}, text=True, timeout=120).stdout
    assert "skipped" not in out, f"recover met a half snapshot: {out}"
    m.start()
    sync(m)
    after = snapshots(m)
    assert len(after) > len(held) or after[-1] != held[-1], "the remount took no snapshot"
    shutil.rmtree(recover_dir)
    run([ALBUMFS, "recover", "--remote", f"s3://{m.bucket}/lib", "--endpoint", m.gateway.endpoint, recover_dir],
        env={**os.environ, **m.keys}, timeout=120)
    expected = listing(m.mp)
    m.unmount()   # (its lease released: the recovered store may write, and fetch)
    again = mount_factory("again", store=recover_dir, env=m.keys)
    assert listing(again.mp) == expected
