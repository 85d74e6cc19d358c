"""Crash safety with a remote (SEMANTICS.md § Remote storage; the crash test's own promises are in
test_crash.py): the same workload of parallel writers, renames, deletes, restores, purges, links,
overwrites and `cp`, on a store whose originals go to a real radosgw and whose local cache is
bounded (`-o cache_size=64K`, so uploads, evictions, downloads of evicted originals and the deletes
of purged objects are all under way), SIGKILLed at a seeded moment, ALBUMFS_REMOTE_CRASH_ROUNDS
times per iteration. After every remount:

- every promise of test_crash.py holds: each file whose last operation returned is where it left
  it with the same bytes (check_library reads every file whole, so evicted originals come back
  from the bucket, each chunk checked: no half or wrong object is ever served), nothing is
  half-linked, and `albumfs fsck` is clean;
- `albumfs fsck --remote` is clean: every object an asset records is in the bucket with its size
  and ETag (nothing needed was deleted), and no object is there that the library does not know
  (an upload cut by the kill, or whose asset was purged, left nothing behind);
- at the end, `albumfs sync --wait` drains the queue and every asset's current content is in the
  bucket: nothing closed was lost.

Settings: ALBUMFS_REMOTE_CRASH_ITERATIONS (default 2: about 2 minutes), ALBUMFS_REMOTE_CRASH_ROUNDS (default 2);
ALBUMFS_CRASH_SEED as in test_crash.py (iteration i uses BASE+i). The issue's 30 kills:
    ALBUMFS_REMOTE_CRASH_ITERATIONS=15 python3 -m pytest Tests/integration/test_remote_crash.py
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
import time

import pytest

from albumfs_testlib import ALBUMFS, CRASH_SEED, assert_fsck_clean, run
from albumfs_workload import Model, setup_library
from objectstore import running_object_store
from test_crash import crash_round

ITERATIONS = int(os.environ.get("ALBUMFS_REMOTE_CRASH_ITERATIONS", "2"))
ROUNDS = int(os.environ.get("ALBUMFS_REMOTE_CRASH_ROUNDS", "2"))
SYNC_TIMEOUT = 180   # uploads are eventual; sync --wait is the event, this only its bound
BUDGET = 180 + 60 * ITERATIONS * ROUNDS


@pytest.fixture(scope="module")
def gateway():
    with running_object_store() as store:
        yield store


def fsck_remote(m) -> subprocess.CompletedProcess:
    return subprocess.run([ALBUMFS, "fsck", "--remote", "--store", m.store], env={**os.environ, **m.env},
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def bucket_objects(gateway, bucket: str) -> set[str]:
    listing = gateway.s3cmd("ls", "-r", f"s3://{bucket}/lib/objects/").stdout
    return {line.split()[-1].rsplit("/", 1)[1] for line in listing.splitlines() if "s3://" in line}


@pytest.mark.mount_timeout(BUDGET)
def test_remote_crash_iterations(gateway, mount_factory, tmp_path):
    print(f"remote crash test: ALBUMFS_CRASH_SEED={CRASH_SEED} ALBUMFS_REMOTE_CRASH_ITERATIONS={ITERATIONS} "
          f"ALBUMFS_REMOTE_CRASH_ROUNDS={ROUNDS}")
    keys = {"AWS_ACCESS_KEY_ID": gateway.access_key, "AWS_SECRET_ACCESS_KEY": gateway.secret_key}
    for i in range(ITERATIONS):
        seed = CRASH_SEED + i
        rng = random.Random(seed)
        replay = f"(replay: ALBUMFS_CRASH_SEED={seed} ALBUMFS_REMOTE_CRASH_ITERATIONS=1)"
        bucket = f"crash{seed % 10**9:x}i{i}"
        store = tmp_path / f"it{i}" / "store"
        store.parent.mkdir(parents=True)
        run([ALBUMFS, "init", "--remote", f"s3://{bucket}/lib", "--endpoint", gateway.endpoint, store],
            env={**os.environ, **keys})
        m = mount_factory(f"it{i}", store=store, env=keys, start=False)
        m.options.append("cache_size=64K")
        m.start()
        scratch = tmp_path / f"it{i}" / "scratch"
        scratch.mkdir()
        model = Model()
        setup_library(m, model, rng)
        summary = []
        for r in range(ROUNDS):
            if r:
                m.start()
            counts = crash_round(m, model, rng, r, scratch, hurry_uploads=True)
            m.unmount()
            assert_fsck_clean(m.store, f"iteration {i} {replay}, after crash {r + 1} and a remount")
            checked = fsck_remote(m)
            assert checked.returncode == 0, (f"fsck --remote, iteration {i} {replay}, after crash {r + 1}: "
                                             f"exit {checked.returncode}\n{checked.stdout[-4000:]}{checked.stderr[-2000:]}")
            summary.append(counts)
        m.start()
        run([ALBUMFS, "sync", "--wait", "--timeout", str(SYNC_TIMEOUT), m.mp], timeout=SYNC_TIMEOUT + 30)
        # Every asset's content is in the bucket (read back through the library, checked as it comes).
        roll = m.mp / "Camera Roll"
        wanted = {}
        for name in os.listdir(roll):
            with open(roll / name, "rb") as f:
                wanted[hashlib.sha256(f.read()).hexdigest()] = name
        missing = set(wanted) - bucket_objects(gateway, bucket)
        details = [f"{wanted[h]} ({os.getxattr(roll / wanted[h], 'user.albumfs.storage').decode()}, "
                   f"{os.stat(roll / wanted[h]).st_size} bytes)" for h in sorted(missing)[:5]]
        assert not missing, (f"iteration {i} {replay}: {len(missing)} of {len(wanted)} contents not in the bucket "
                             f"after sync --wait: {details}")
        m.unmount()
        print(f"iteration {i} seed {seed}: " + "; ".join(
            ", ".join(f"{k} {v}" for k, v in c.items()) for c in summary))
        shutil.rmtree(m.base, ignore_errors=True)
