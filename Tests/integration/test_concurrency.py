"""Many processes at once (issue 3 part 3): nothing lost, nothing duplicated, no deadlock.

Writers are real `cp` processes; racers and readers are forked Python processes. Every wait
has a deadline: a process still running at its deadline is reported as a deadlock with the
daemon's kernel thread stacks, and the FUSE connection is aborted so nothing stays hung.
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import random
import subprocess
import time
from pathlib import Path

import pytest

from albumfs_testlib import (
    CRASH_SEED, abort_fuse_connection, assert_fsck_clean, names, payload, sha256, thread_stacks, wait_all, write,
)
from albumfs_workload import Model, Workload, check_library, setup_library

WRITERS = 8
FILES_PER_WRITER = 250
DEADLINE = 120          # seconds for one group of processes; a deadlock fails the test there

FORK = multiprocessing.get_context("fork")


def make_sources(tmp_path: Path, writer: int, names_: list[str], tag: str) -> dict[str, str]:
    """Source files of one writer under tmp_path/src-<tag>-<writer>; name -> sha256."""
    src = tmp_path / f"src-{tag}-{writer}"
    src.mkdir()
    rng = random.Random(f"{tag}-{writer}")
    out = {}
    for n in names_:
        data = rng.randbytes(rng.randrange(0, 12 * 1024))
        write(src / n, data)
        out[n] = sha256(data)
    return out


def writer_sources(tmp_path, tag: str, writers: int):
    """Source trees for `writers` cp processes: (expected name → sha, [(source dir, names)])."""
    expected, sources = {}, []
    for w in range(writers):
        ns = [f"{tag}{w}-{i:03d}.jpg" for i in range(FILES_PER_WRITER)]
        expected.update(make_sources(tmp_path, w, ns, tag))
        sources.append((tmp_path / f"src-{tag}-{w}", ns))
    return expected, sources


def start_cp(src: Path, names_: list[str], dest: Path, cwd=None) -> subprocess.Popen:
    """cp SRC/n1 SRC/n2 … DEST/ (relative DEST with cwd)."""
    return subprocess.Popen(["cp", *[os.fspath(src / n) for n in names_], os.fspath(dest) + "/"],
                            cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def assert_cp_ok(procs) -> None:
    for p in procs:
        out, err = p.communicate(timeout=10)
        assert p.returncode == 0, f"{p.args[0]} … exit {p.returncode}: {err.decode(errors='replace')[-2000:]}"


def roll_by_ino(mount) -> dict[int, str]:
    """Roll inode -> name; fails on an inode listed twice."""
    out = {}
    for n in os.listdir(mount.roll):
        i = os.lstat(mount.roll / n).st_ino
        assert i not in out, f"inode {i} is in the roll twice: {out[i]!r} and {n!r}"
        out[i] = n
    return out


@pytest.mark.mount_timeout(240)
def test_parallel_writers_into_one_album(mount, tmp_path):
    """8 cp processes copy 250 files each into the same album at once: exactly 2000 entries in the
    album and in the roll, 2000 distinct assets, every content byte-identical."""
    album = mount.albums / "Together"
    album.mkdir()
    expected = {}
    sources = []
    for w in range(WRITERS):
        ns = [f"w{w}-{i:03d}.jpg" for i in range(FILES_PER_WRITER)]
        expected.update(make_sources(tmp_path, w, ns, "one"))
        sources.append((tmp_path / f"src-one-{w}", ns))
    procs = [start_cp(src, ns, album) for src, ns in sources]
    wait_all(procs, DEADLINE, mount, "cp writers")
    assert_cp_ok(procs)

    total = WRITERS * FILES_PER_WRITER
    listed = names(album)
    assert len(listed) == total, f"album lists {len(listed)} entries, want {total}"
    assert listed == sorted(expected)
    assert names(mount.roll) == sorted(expected), "the roll must hold the same 2000 names"
    roll = roll_by_ino(mount)
    inos = set()
    for n, digest in expected.items():
        st = os.lstat(album / n)
        assert st.st_ino in roll, f"{n}: inode {st.st_ino} not in the roll"
        assert roll[st.st_ino] == n
        assert st.st_nlink == 2, f"{n}: st_nlink {st.st_nlink}"
        assert sha256(album / n) == digest, f"{n}: content differs"
        inos.add(st.st_ino)
    assert len(inos) == total, "two entries share an asset"


@pytest.mark.mount_timeout(240)
def test_parallel_writers_into_eight_albums_same_names(mount, tmp_path):
    """8 cp processes copy 250 files each, under the same 250 names, into 8 albums at once:
    each album holds its 250, the roll exactly x, x (2), …, x (8) for every name, nothing
    lost or doubled, every content byte-identical."""
    ns = [f"IMG_{i:04d}.JPG" for i in range(FILES_PER_WRITER)]
    expected = []
    for w in range(WRITERS):
        (mount.albums / f"A{w}").mkdir()
        expected.append(make_sources(tmp_path, w, ns, "eight"))
    procs = [start_cp(tmp_path / f"src-eight-{w}", ns, mount.albums / f"A{w}") for w in range(WRITERS)]
    wait_all(procs, DEADLINE, mount, "cp writers")
    assert_cp_ok(procs)

    want_roll = sorted([n for n in ns] + [f"IMG_{i:04d} ({k}).JPG" for i in range(FILES_PER_WRITER)
                                          for k in range(2, WRITERS + 1)])
    got_roll = names(mount.roll)
    assert len(got_roll) == len(want_roll), f"roll has {len(got_roll)} entries, want {len(want_roll)}"
    assert got_roll == want_roll, f"unexpected roll names: {sorted(set(got_roll) ^ set(want_roll))[:20]}"
    roll = roll_by_ino(mount)
    roll_content = {i: sha256(mount.roll / n) for i, n in roll.items()}
    seen = set()
    for w in range(WRITERS):
        a = mount.albums / f"A{w}"
        assert names(a) == ns, f"A{w}: {len(names(a))} entries"
        for n, digest in expected[w].items():
            st = os.lstat(a / n)
            assert st.st_ino in roll, f"A{w}/{n}: inode not in the roll"
            assert st.st_ino not in seen, f"A{w}/{n}: asset shared with another album"
            seen.add(st.st_ino)
            assert sha256(a / n) == digest, f"A{w}/{n}: content differs"
            assert roll_content[st.st_ino] == digest, f"A{w}/{n}: its roll entry {roll[st.st_ino]!r} differs"
            # the roll entry is this album entry's name or one of its (n) forms
            base = n[:-len(".JPG")]
            assert roll[st.st_ino] == n or roll[st.st_ino].startswith(base + " ("), roll[st.st_ino]


def _race(barrier, queue, action: str, target: str) -> None:
    """One racer: wait for the others, then mkdir / create O_EXCL / mkdir -p; report the outcome."""
    try:
        barrier.wait(timeout=30)
        if action == "mkdir":
            os.mkdir(target)
        elif action == "create":
            os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        else:
            os.makedirs(target, exist_ok=True)
        queue.put("ok")
    except OSError as e:
        queue.put(errno.errorcode.get(e.errno, str(e.errno)))
    except Exception as e:  # noqa: BLE001 - reported to the parent
        queue.put(repr(e))


def race(mount, action: str, target, n: int = WRITERS) -> list[str]:
    """n forked processes do `action` on target at the same instant; their outcomes, sorted."""
    barrier = FORK.Barrier(n)
    queue = FORK.Queue()
    procs = [FORK.Process(target=_race, args=(barrier, queue, action, os.fspath(target)), daemon=True)
             for _ in range(n)]
    for p in procs:
        p.start()
    wait_all(procs, 60, mount, f"{action} racers")
    return sorted(queue.get(timeout=10) for _ in range(n))


@pytest.mark.mount_timeout(240)
def test_parallel_mkdir_and_create_of_one_name(mount):
    """8 processes mkdir the same album name at once (x 15 names, top level and nested): exactly one
    wins, the others get EEXIST, one album listed; same for O_EXCL creates of one file name in an
    album (one asset in the roll); `mkdir -p` of one path from 8 processes succeeds everywhere."""
    winner = ["EEXIST"] * (WRITERS - 1) + ["ok"]
    for r in range(10):
        assert race(mount, "mkdir", mount.albums / f"R{r}") == winner, f"mkdir Albums/R{r}"
    (mount.albums / "Parent").mkdir()
    for r in range(5):
        assert race(mount, "mkdir", mount.albums / "Parent" / f"C{r}") == winner, f"mkdir Parent/C{r}"
    assert names(mount.albums) == sorted(["Parent"] + [f"R{r}" for r in range(10)])
    assert names(mount.albums / "Parent") == [f"C{r}" for r in range(5)]

    for r in range(5):
        assert race(mount, "create", mount.albums / "R0" / f"x{r}.jpg") == winner, f"create x{r}.jpg"
    assert names(mount.albums / "R0") == [f"x{r}.jpg" for r in range(5)]
    assert names(mount.roll) == [f"x{r}.jpg" for r in range(5)], "one asset per won create"

    for r in range(3):
        assert race(mount, "mkdir-p", mount.albums / f"P{r}" / "a" / "b") == ["ok"] * WRITERS
        assert names(mount.albums / f"P{r}") == ["a"] and names(mount.albums / f"P{r}" / "a") == ["b"]


def _reader(mp: str, stop, queue, allowed_gone_prefix: str, stable: dict) -> None:
    """List, stat and read everything under the mount until stopped; report unexpected errors.

    ENOENT is allowed only for names starting with allowed_gone_prefix (files another process
    deletes); the stable files must read back exactly every time."""
    errors, rounds, reads = [], 0, 0

    def note(what, e):
        name = os.path.basename(what)
        if isinstance(e, OSError) and e.errno == errno.ENOENT and name.startswith(allowed_gone_prefix):
            return
        errors.append(f"{what}: {e!r}")

    try:
        while not stop.is_set() and len(errors) < 20:
            rounds += 1
            for d in (os.path.join(mp, "Camera Roll"), os.path.join(mp, "Albums", "Busy")):
                try:
                    listing = os.listdir(d)
                except OSError as e:
                    note(d, e)
                    continue
                for n in listing[:: max(1, len(listing) // 60)] + [n for n in listing if n in stable]:
                    p = os.path.join(d, n)
                    try:
                        os.stat(p)
                        with open(p, "rb") as f:
                            data = f.read()
                        reads += 1
                    except OSError as e:
                        note(p, e)
                        continue
                    if n in stable and sha256(data) != stable[n]:
                        errors.append(f"{p}: a stable file read back different content")
            for dirpath, _dirs, files in os.walk(os.path.join(mp, "Albums")):
                for n in files[:5]:
                    try:
                        os.lstat(os.path.join(dirpath, n))
                    except OSError as e:
                        note(os.path.join(dirpath, n), e)
    except Exception as e:  # noqa: BLE001 - reported to the parent
        errors.append(f"reader crashed: {e!r}")
    queue.put((errors, rounds, reads))


def _deleter(mp: str, count: int, prefix: str, queue) -> None:
    """Create files in the busy album and delete each from the roll soon after."""
    errors = []
    album = os.path.join(mp, "Albums", "Busy")
    try:
        for i in range(count):
            n = f"{prefix}{i:03d}.jpg"
            with open(os.path.join(album, n), "wb") as f:
                f.write(payload(3000, n))
            if i >= 3:
                os.unlink(os.path.join(mp, "Camera Roll", f"{prefix}{i - 3:03d}.jpg"))
    except Exception as e:  # noqa: BLE001 - reported to the parent
        errors.append(repr(e))
    queue.put(errors)


@pytest.mark.mount_timeout(240)
def test_readers_while_writers_write(mount, tmp_path):
    """4 cp writers and a creating-and-deleting writer work in one album while 3 readers list, stat
    and read the roll and the album: no error but ENOENT for deleted names, stable files always
    read back exactly, and afterwards every written file is complete."""
    busy = mount.albums / "Busy"
    busy.mkdir()
    stable = {}
    for i in range(20):
        data = payload(20_000 + i, f"stable{i}")
        write(busy / f"stable{i:02d}.jpg", data)
        stable[f"stable{i:02d}.jpg"] = sha256(data)
    expected, sources = writer_sources(tmp_path, "rw", writers=4)

    stop = FORK.Event()
    rq, dq = FORK.Queue(), FORK.Queue()
    readers = [FORK.Process(target=_reader, args=(os.fspath(mount.mp), stop, rq, "del-", stable), daemon=True)
               for _ in range(3)]
    for r in readers:
        r.start()
    deleter = FORK.Process(target=_deleter, args=(os.fspath(mount.mp), 150, "del-", dq), daemon=True)
    deleter.start()
    # cp writers in small batches, so there are many creates for the readers to race with
    procs = []
    for src, ns in sources:
        procs.append(start_cp(src, ns, busy))
    try:
        wait_all(procs + [deleter], DEADLINE, mount, "writers")
    finally:
        stop.set()
    wait_all(readers, 60, mount, "readers")
    assert_cp_ok(procs)
    assert dq.get(timeout=10) == [], "the deleting writer failed"
    reports = [rq.get(timeout=10) for _ in readers]
    errors = [e for r in reports for e in r[0]]
    assert not errors, "readers saw errors:\n  " + "\n  ".join(errors[:30])
    assert all(r[1] >= 1 for r in reports), f"a reader never completed a round: {reports}"

    listed = set(names(busy))
    want = set(expected) | set(stable) | {f"del-{i:03d}.jpg" for i in range(147, 150)}
    assert listed == want, f"missing {sorted(want - listed)[:10]}, unexpected {sorted(listed - want)[:10]}"
    assert set(names(mount.roll)) == want
    for n, digest in {**expected, **stable}.items():
        assert sha256(busy / n) == digest, f"{n}: content differs after the writers finished"


@pytest.mark.mount_timeout(240)
def test_album_renamed_while_files_are_copied_into_it(mount, tmp_path):
    """4 cp processes (working directory: the album) copy 250 files each into an album that is
    renamed and moved 6 times meanwhile: all 1000 files land in the album under its final name,
    none anywhere else, 1000 assets in the roll."""
    (mount.albums / "Trips").mkdir()
    path = mount.albums / "Incoming"
    path.mkdir()
    expected, sources = writer_sources(tmp_path, "mv", writers=4)
    procs = [start_cp(src, ns, Path("."), cwd=path) for src, ns in sources]
    moves = [mount.albums / "Renamed1", mount.albums / "Trips" / "Renamed2", mount.albums / "Renamed3",
             mount.albums / "Trips" / "Renamed4", mount.albums / "Renamed5", mount.albums / "Final"]
    # Each rename comes once 40 more files have landed (the copies are under way), not after a
    # pause: on a loaded machine a pause of 40 ms may see no copy at all, or every one finished.
    # A copy that makes no progress is left to wait_all, which reports a deadlock.
    deadline = time.monotonic() + DEADLINE
    renamed_while_copying = 0
    for k, target in enumerate(moves, 1):
        while (len(os.listdir(path)) < 40 * k and time.monotonic() < deadline
               and any(p.poll() is None for p in procs)):
            time.sleep(0.005)
        os.rename(path, target)
        path = target
        renamed_while_copying += any(p.poll() is None for p in procs)
    wait_all(procs, DEADLINE, mount, "cp writers")
    assert_cp_ok(procs)
    assert renamed_while_copying >= 2, "the copies finished before the album was renamed: the test proved nothing"

    assert names(path) == sorted(expected), f"{path.name}: {len(names(path))} entries, want {len(expected)}"
    assert names(mount.albums) == ["Final", "Trips"] and names(mount.albums / "Trips") == []
    assert names(mount.roll) == sorted(expected)
    for n, digest in expected.items():
        assert sha256(path / n) == digest, f"{n}: content differs"


@pytest.mark.mount_timeout(240)
def test_mixed_operations_from_many_threads(mount, tmp_path):
    """4 threads create, overwrite, rename, move, unlink, ln and safe-save files and mkdir albums,
    while a fifth runs `cp` into albums, for 4 s (the crash test's workload, without the kill):
    no thread may stay blocked (a deadlock), no operation may fail, and afterwards the library is
    exactly what they did (albumfs_workload.check_library with every operation known); fsck clean."""
    rng = random.Random(CRASH_SEED)
    model = Model()
    setup_library(mount, model, rng)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    load = Workload(str(mount.mp), model, rng, 0, scratch)
    load.start()
    time.sleep(4)
    stuck = load.join(timeout=30)
    if stuck:
        stacks = thread_stacks(mount.proc.pid)
        aborted = abort_fuse_connection(mount.abort_file)
        load.join(timeout=10)
        pytest.fail(f"deadlock: threads {stuck} still blocked 30 s after they were told to stop, after "
                    f"{load.ops} operations (connection {'aborted' if aborted else 'NOT aborted'}; seed "
                    f"{CRASH_SEED})\n--- daemon threads (kernel stacks) ---\n{stacks}", pytrace=False)
    assert not load.errors, "operations failed:\n  " + "\n  ".join(e for _, e in load.errors)
    assert load.ops >= 100, f"only {load.ops} operations in 4 s"
    model.settle(float("inf"))
    # Without a kill every operation returned, so every file's state is known.
    assert model.dropped == 0, f"{model.dropped} files in an unknown state without a kill"
    check_library(str(mount.mp), model)
    mount.unmount()
    assert_fsck_clean(mount.store, "after the mixed workload")


def _trash_worker(mp: str, role: str, items: list[str], uid: int, stop, queue) -> None:
    """One of the Empty Trash race's processes; puts (role, error or None) on the queue."""
    root = Path(mp)
    deleted, roll = root / "Recently Deleted", root / "Camera Roll"
    files, info = root / f".Trash-{uid}" / "files", root / f".Trash-{uid}" / "info"
    try:
        if role == "empty":            # a file manager's Empty Trash: purges, one by one
            for x in items:
                os.unlink(files / x)
        elif role == "purge":          # rm in Recently Deleted: purges whose names leave files/
            for x in items:
                os.unlink(deleted / x)
        elif role == "restore":        # restores out of Recently Deleted, into the roll
            for x in items:
                os.rename(deleted / x, roll / x)
        elif role == "delete":         # rm in the roll: names leave the albums, enter Recently Deleted
            for x in items:
                os.unlink(roll / x)
        else:                          # listings and lookups in every directory the others change
            while not stop.is_set():
                for d in (deleted, files, info, roll, root / "Albums" / "A"):
                    for x in os.listdir(d)[:20]:
                        try:
                            os.lstat(d / x)
                        except FileNotFoundError:
                            pass
        queue.put((role, None))
    except Exception as e:             # noqa: BLE001 - reported by the test
        queue.put((role, f"{type(e).__name__}: {e}"))


@pytest.mark.mount_timeout(240)
def test_empty_trash_restores_deletes_and_listings_at_once(mount):
    """An unlink's names changed elsewhere go to the kernel, which takes those directories' locks
    (docs/DESIGN.md, "Kernel caches and visibility"), while other callers hold them: here an
    Empty Trash (purges: Recently Deleted and info/ names), `rm` in Recently Deleted
    (purges: files/ and info/ names; with the Empty Trash, each unlink's directory is the
    other's target), restores
    (renames holding Recently Deleted and the roll, whose names go through the queue), deletes
    from the roll (album names) and two processes listing and looking up in all of them run at
    once. No process may stay blocked (DEADLINE), none fails, and afterwards each photo is where
    its last call put it; fsck clean."""
    a = mount.albums / "A"
    a.mkdir()
    uid = os.getuid()
    groups = {role: [f"{role}-{i}.jpg" for i in range(120)] for role in ("empty", "purge", "restore", "delete")}
    for role, items in groups.items():
        for x in items:
            write(mount.roll / x, b"x")
            os.link(mount.roll / x, a / x)
            if role != "delete":
                os.unlink(mount.roll / x)       # into Recently Deleted and the trash
    stop, queue = FORK.Event(), FORK.Queue()
    workers = [FORK.Process(target=_trash_worker, args=(os.fspath(mount.mp), role, items, uid, stop, queue),
                            daemon=True) for role, items in groups.items()]
    readers = [FORK.Process(target=_trash_worker, args=(os.fspath(mount.mp), "read", [], uid, stop, queue),
                            daemon=True) for _ in range(2)]
    for p in readers + workers:
        p.start()
    try:
        wait_all(workers, DEADLINE, mount, "Empty Trash, restore and delete processes")
    finally:
        stop.set()
    wait_all(readers, DEADLINE, mount, "readers")
    results = [queue.get(timeout=10) for _ in workers + readers]
    assert [r for r in results if r[1] is not None] == [], "a process failed"
    deleted = names(mount.mp / "Recently Deleted")
    gone = groups["empty"] + groups["purge"]
    assert not set(gone) & set(names(mount.roll) + deleted + names(a)), "a purged photo is still there"
    for x in groups["restore"]:
        assert (a / x).exists() and x not in deleted, f"{x} not restored with its album"
    for x in groups["delete"]:
        assert x in deleted and not (a / x).exists(), f"{x} not deleted from its album"
    mount.unmount()
    assert_fsck_clean(mount.store, "after the Empty Trash race")
