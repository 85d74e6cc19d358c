"""SEMANTICS.md § Surviving the machine, one writer: two stores on one host with one bucket, against
a real RADOS Gateway on loopback. (Two takers racing for one expired lease, each on its own
connection and both past their read, are LeaseTests.racingTakers: exactly one wins.)"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from albumfs_testlib import ALBUMFS, payload, run, write
from test_remote import gateway  # noqa: F401 (the module's radosgw, a fixture)

LEASE = 4   # seconds (-o lease_time): renewed every third of it


@pytest.fixture
def two_stores(gateway, mount_factory, tmp_path, request):
    """Stores A and B, both with the remote s3://BUCKET/lib; A mounted (lease_time=4)."""
    bucket = "w" + format(abs(hash(request.node.name)) % 10**12, "x")
    keys = {"AWS_ACCESS_KEY_ID": gateway.access_key, "AWS_SECRET_ACCESS_KEY": gateway.secret_key}
    stores = []
    for name in ("a", "b"):
        store = tmp_path / name / "store"
        store.parent.mkdir(parents=True)
        run([ALBUMFS, "init", "--remote", f"s3://{bucket}/lib", "--endpoint", gateway.endpoint, store],
            env={**os.environ, **keys})
        stores.append(store)
    a = mount_factory("a", store=stores[0], env=keys, options=[f"lease_time={LEASE}"])
    mp_b = tmp_path / "b" / "mnt"
    mp_b.mkdir()
    mounted = []

    def mount_b(*options: str) -> subprocess.CompletedProcess:
        p = subprocess.run([ALBUMFS, "mount", "--store", stores[1], "-o", ",".join([f"lease_time={LEASE}", *options]), mp_b],
                           env={**os.environ, **keys}, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if p.returncode == 0:
            mounted.append(mp_b)
        return p

    yield a, mount_b, mp_b, stores
    for mp in mounted:
        subprocess.run([ALBUMFS, "unmount", mp], capture_output=True, timeout=60)


def test_a_second_writer_is_refused_naming_the_holder_until_its_lease_expires(two_stores):
    """A holds the lease: B's read-write mount is refused with one line naming A's host and when
    its lease expires; after A is SIGKILLed, B mounts once the lease's stated time is past (the
    lease is eventual by the contract: polled, bounded), and not before it."""
    a, mount_b, mp_b, _ = two_stores
    refused = mount_b()
    assert refused.returncode != 0, "a second writer was let in"
    line = refused.stderr.strip()
    assert f"mounted read-write on {os.uname().nodename}" in line and " until 20" in line and "take_over" in line, line
    a.kill()
    killed = time.time()
    deadline = killed + LEASE + 30
    while True:
        p = mount_b()
        if p.returncode == 0:
            break
        assert time.time() < deadline, f"the dead holder's lease never expired: {p.stderr}"
        assert "mounted read-write on" in p.stderr, p.stderr
        time.sleep(0.2)
    # Its last renewal was at most a third of the lease before the kill: the lease ran on after it.
    assert time.time() - killed >= LEASE * 2 / 3 - 0.5, "B got in before A's lease could have expired"
    write(mp_b / "Camera Roll" / "b.jpg", payload(10_000, "b"))
    run([ALBUMFS, "sync", "--wait", "--timeout", "60", mp_b], timeout=90)


def test_take_over_takes_a_live_lease_and_the_old_writer_stops_writing(two_stores):
    """`-o take_over` takes A's live lease at once; A's next renewal finds it lost, and from then
    on A uploads nothing (its photo waits; stats says why) while B works."""
    a, mount_b, mp_b, stores = two_stores
    p = mount_b("take_over")
    assert p.returncode == 0, p.stderr
    deadline = time.monotonic() + LEASE + 30
    write(a.roll / "after.jpg", payload(12_000, "after"))
    while True:
        stats = run([ALBUMFS, "stats", "--json", a.mp], text=True).stdout
        if "taken by" in stats:
            break
        assert time.monotonic() < deadline, f"A never noticed its lease was taken: {stats}"
        time.sleep(0.2)
    assert int(os.getxattr(a.mp, "user.albumfs.uploading")) == 1, "A uploaded without the lease"
    write(mp_b / "Camera Roll" / "b.jpg", payload(10_000, "b"))
    run([ALBUMFS, "sync", "--wait", "--timeout", "60", mp_b], timeout=90)
