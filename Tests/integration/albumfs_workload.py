"""The workload of the crash test and of the mixed-operations concurrency test: a model of
what a set of threads did to a mounted library, the threads, and the checks of a library
against the model (see test_crash.py for what is checked).

Each worker thread owns its files (so their history is exact) and records, for every operation,
the moment it returned. A file counts as known only if its last operation returned before a
given instant (the kill); without a kill (instant = +inf) the model is exact.
"""

from __future__ import annotations

import dataclasses
import errno
import itertools
import os
import random
import shutil
import stat
import subprocess
import threading
import time
from dataclasses import dataclass, field

from albumfs_testlib import read_digest, sha256, write

WORKERS = 4
SHARED_ALBUMS = ["Albums/Shared0", "Albums/Shared1", "Albums/Trips/2024/Paris"]
# The workload's operations and their relative frequencies.
OPS = {"create_album": 30, "create_roll": 8, "rename": 10, "move": 10, "rm_ref": 5, "overwrite": 8,
       "update": 6, "ln": 6, "rm_link": 3, "delete": 4, "restore": 3, "purge": 2, "mkdir": 2,
       "hide": 3, "show": 2}
for _op in filter(None, os.environ.get("ALBUMFS_CRASH_WITHOUT", "").split(",")):
    OPS.pop(_op.strip())   # to isolate a failure: e.g. ALBUMFS_CRASH_WITHOUT=overwrite,update
UNIQUE = itertools.count(1)   # suffixes for new names: a name is never used twice


# --- the model ------------------------------------------------------------------------


@dataclass(frozen=True)
class State:
    """Where one tracked file is and what it holds, as its last completed operation left it.

    paths: mount-relative paths whose entry must be this asset (ino None: not known, learnt
    from the first path at the check); in_roll: the asset must be in the roll (False: it
    was deleted and must be nowhere); gone: inodes that must be nowhere (assets an update
    replaced); absent: paths that must not exist."""
    paths: tuple[str, ...]
    ino: int | None
    sha: str
    in_roll: bool = True
    gone: tuple[int, ...] = ()
    absent: tuple[str, ...] = ()
    in_album: bool = True   # created in an album (else in the roll); decides the allowed ops
    # In Recently Deleted (in_roll False): its asset must be there, and nowhere live;
    # restore_paths: the roll and album entries a restore brings back.
    deleted: bool = False
    restore_paths: tuple[str, ...] = ()
    # The first version an update replaced, (inode or None, sha256): kept as the asset's
    # original for as long as it lives (SEMANTICS.md § Edits keep the original).
    original: tuple[int | None, str] | None = None
    # In Hidden/ (paths: its one entry there): restore_paths are where showing it puts it back.
    hidden: bool = False

    def __post_init__(self):
        # A path the file holds again (ln after rm of the same link) is no longer absent.
        object.__setattr__(self, "absent", tuple(a for a in self.absent if a not in self.paths))


@dataclass
class Tracked:
    """A file and the history of the operations on it: (completion time or None, state)."""
    name: str
    owner: int
    history: list = field(default_factory=list)

    @property
    def state(self) -> State:
        return self.history[-1][1]

    def begin(self) -> None:
        self.history.append((None, None))

    def done(self, state: State) -> None:
        self.history[-1] = (time.monotonic(), state)

    def certain_state(self, kill_time: float) -> State | None:
        """The state if the last operation on the file returned before the kill, else None."""
        if not self.history:
            return None
        t, state = self.history[-1]
        return state if t is not None and t < kill_time else None


class Model:
    """Everything the workload knows for certain, carried from round to round."""

    def __init__(self):
        self.files: list[Tracked] = []
        self.albums: dict[str, float] = {}   # album path -> time its mkdir returned
        self.dropped = 0                      # files left in an unknown state by a kill

    def settle(self, kill_time: float) -> None:
        """Keep only files whose last operation returned before the kill, and albums likewise."""
        keep = []
        for f in self.files:
            state = f.certain_state(kill_time)
            if state is None:
                self.dropped += 1
            else:
                f.history = [(float("-inf"), state)]
                keep.append(f)
        self.files = keep
        self.albums = {a: float("-inf") for a, t in self.albums.items() if t < kill_time}


# --- the workload -----------------------------------------------------------------------


class Workload:
    """WORKERS Python writer threads and one `cp` thread against one mount, until stopped."""

    def __init__(self, mp, model: Model, rng: random.Random, round_: int, scratch):
        self.mp = mp
        self.model = model
        self.round = round_
        self.scratch = scratch
        self.stop = threading.Event()
        self.errors: list[tuple[float, str]] = []   # (time, what) of every failed operation
        self.ops = 0
        self.lock = threading.Lock()
        self.rngs = [random.Random(rng.random()) for _ in range(WORKERS + 1)]
        self.threads = [threading.Thread(target=self._worker, args=(w,), daemon=True, name=f"worker{w}")
                        for w in range(WORKERS)]
        self.threads.append(threading.Thread(target=self._cp_worker, daemon=True, name="cp"))
        self.cp_procs: list[subprocess.Popen] = []

    def p(self, rel: str) -> str:
        return os.path.join(self.mp, rel)

    # -- helpers used by the workers

    def _new_file(self, w: int, k: int) -> Tracked:
        f = Tracked(name=f"w{w}r{self.round}n{k}", owner=w)
        with self.lock:
            self.model.files.append(f)
        return f

    def _write_new(self, path: str, data: bytes, rng: random.Random) -> int:
        """Create path (O_EXCL) and write data in chunks; returns the inode (fstat before close)."""
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        try:
            self._write_all(fd, data, rng)
            ino = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        return ino

    @staticmethod
    def _write_all(fd: int, data: bytes, rng: random.Random) -> None:
        chunk = rng.choice([4096, 65536, 131072])
        for off in range(0, len(data), chunk):
            os.write(fd, data[off:off + chunk])

    @staticmethod
    def _data(rng: random.Random) -> bytes:
        size = rng.randrange(256 * 1024, 1024 * 1024) if rng.random() < 0.08 else rng.randrange(0, 48 * 1024)
        return rng.randbytes(size)

    def _albums(self) -> list[str]:
        with self.lock:
            return [a for a, t in self.model.albums.items()]

    # -- the Python writers

    def _worker(self, w: int) -> None:
        rng = self.rngs[w]
        k = 0
        while not self.stop.is_set():
            mine = [f for f in self.model.files if f.owner == w and f.history and f.history[-1][0] is not None]
            album_files = [f for f in mine if f.state.in_album and f.state.paths]
            roll_files = [f for f in mine if not f.state.in_album and f.state.in_roll]
            deleted_files = [f for f in mine if f.state.deleted]
            hidden_files = [f for f in mine if f.state.hidden]
            op = rng.choices(list(OPS), weights=list(OPS.values()))[0]
            what = op
            try:
                if op in ("create_album", "create_roll"):
                    k += 1
                    f = self._new_file(w, k)
                    what = f"{op} {f.name}"
                    data = self._data(rng)
                    in_album = op == "create_album"
                    rel = f"{rng.choice(self._albums())}/{f.name}.jpg" if in_album else f"Camera Roll/{f.name}.jpg"
                    f.begin()
                    ino = self._write_new(self.p(rel), data, rng)
                    f.done(State(paths=(rel,), ino=ino, sha=sha256(data), in_album=in_album))
                elif op in ("rename", "move", "rm_ref", "overwrite", "update") and album_files:
                    f = rng.choice(album_files)
                    s = f.state
                    rel = s.paths[0]
                    album, base = os.path.split(rel)
                    what = f"{op} {rel}"
                    if op == "rename":
                        new = f"{album}/{f.name}-{next(UNIQUE)}.jpg"
                        f.begin()
                        os.rename(self.p(rel), self.p(new))
                        f.done(State(paths=(new,), ino=s.ino, sha=s.sha, gone=s.gone, absent=s.absent + (rel,), original=s.original))
                    elif op == "move":
                        others = [a for a in self._albums() if a != album]
                        new = f"{rng.choice(others)}/{base}"
                        f.begin()
                        os.rename(self.p(rel), self.p(new))
                        f.done(State(paths=(new,), ino=s.ino, sha=s.sha, gone=s.gone, absent=s.absent + (rel,), original=s.original))
                    elif op == "rm_ref":
                        f.begin()
                        os.unlink(self.p(rel))
                        f.done(State(paths=(), ino=s.ino, sha=s.sha, gone=s.gone, absent=s.absent + (rel,), original=s.original))
                    elif op == "overwrite":
                        data = self._data(rng)
                        f.begin()
                        fd = os.open(self.p(rel), os.O_WRONLY | os.O_TRUNC)
                        try:
                            self._write_all(fd, data, rng)
                        finally:
                            os.close(fd)
                        f.done(State(paths=(rel,), ino=s.ino, sha=sha256(data), gone=s.gone, absent=s.absent, original=s.original))
                    else:  # update: write a temporary next to it, rename it over (rsync, editors)
                        data = self._data(rng)
                        tmp = f"{album}/.{base}.{next(UNIQUE)}.tmp"
                        f.begin()
                        new_ino = self._write_new(self.p(tmp), data, rng)
                        os.rename(self.p(tmp), self.p(rel))
                        gone = s.gone + ((s.ino,) if s.ino is not None else ())
                        f.done(State(paths=(rel,), ino=new_ino, sha=sha256(data), gone=gone,
                                     absent=s.absent + (tmp,), original=s.original or (s.ino, s.sha)))
                elif op == "hide" and roll_files:
                    # Out of the roll and every album, into Hidden/ (SEMANTICS.md § Hidden).
                    f = rng.choice(roll_files)
                    s = f.state
                    roll_rel = s.paths[0]
                    shown = f"Hidden/{os.path.basename(roll_rel)}"
                    what = f"hide {roll_rel}"
                    f.begin()
                    os.rename(self.p(roll_rel), self.p(shown))
                    f.done(State(paths=(shown,), ino=s.ino, sha=s.sha, in_roll=False, in_album=False,
                                 absent=s.absent + s.paths, hidden=True, restore_paths=s.paths, original=s.original))
                elif op == "show" and hidden_files:
                    f = rng.choice(hidden_files)
                    s = f.state
                    what = f"show {s.paths[0]} ({s.restore_paths[0]})"
                    f.begin()
                    # Back into the roll under its old name, and into every album it was in.
                    os.rename(self.p(s.paths[0]), self.p(s.restore_paths[0]))
                    f.done(State(paths=s.restore_paths, ino=s.ino, sha=s.sha, in_album=False,
                                 absent=tuple(a for a in s.absent + s.paths if a not in s.restore_paths),
                                 original=s.original))
                elif op in ("ln", "rm_link", "delete") and roll_files:
                    f = rng.choice(roll_files)
                    s = f.state
                    roll_rel, links = s.paths[0], s.paths[1:]
                    what = f"{op} {roll_rel}"
                    if op == "ln":
                        free = [a for a in self._albums() if not any(os.path.dirname(x) == a for x in links)]
                        if not free:
                            continue
                        link = f"{rng.choice(free)}/{os.path.basename(roll_rel)}"
                        f.begin()
                        os.link(self.p(roll_rel), self.p(link))
                        f.done(State(paths=s.paths + (link,), ino=s.ino, sha=s.sha, in_album=False,
                                     absent=s.absent, original=s.original))
                    elif op == "rm_link":
                        if not links:
                            continue
                        link = rng.choice(links)
                        f.begin()
                        os.unlink(self.p(link))
                        f.done(State(paths=tuple(x for x in s.paths if x != link), ino=s.ino, sha=s.sha,
                                     in_album=False, absent=s.absent + (link,), original=s.original))
                    else:  # delete the asset: it leaves the roll and every album, to Recently Deleted
                        f.begin()
                        os.unlink(self.p(roll_rel))
                        f.done(State(paths=(), ino=s.ino, sha=s.sha, in_roll=False, in_album=False,
                                     absent=s.absent + s.paths, deleted=True, restore_paths=s.paths,
                                     original=s.original))
                elif op in ("restore", "purge") and deleted_files:
                    f = rng.choice(deleted_files)
                    s = f.state
                    name = recently_deleted_name(self.mp, s.ino)
                    what = f"{op} Recently Deleted/{name} ({s.restore_paths[0]})"
                    f.begin()
                    if op == "restore":
                        # Back into the roll under its old name, and into its albums.
                        os.rename(self.p(f"Recently Deleted/{name}"), self.p(s.restore_paths[0]))
                        f.done(State(paths=s.restore_paths, ino=s.ino, sha=s.sha, in_album=False,
                                     absent=tuple(a for a in s.absent if a not in s.restore_paths),
                                     original=s.original))
                    else:
                        os.unlink(self.p(f"Recently Deleted/{name}"))
                        f.done(State(paths=(), ino=s.ino, sha=s.sha, in_roll=False, in_album=False,
                                     absent=s.absent))
                elif op == "mkdir":
                    parent = rng.choice(["Albums", "Albums/Shared0"])
                    k += 1
                    album = f"{parent}/w{w}r{self.round}a{k}"
                    what = f"mkdir {album}"
                    os.mkdir(self.p(album))
                    t = time.monotonic()
                    with self.lock:
                        self.model.albums[album] = t
                else:
                    continue
                with self.lock:
                    self.ops += 1
            except OSError as e:
                with self.lock:
                    self.errors.append((time.monotonic(),
                                        f"worker {w}: {what}: {errno.errorcode.get(e.errno, e.errno)} {e}"))
                return
            except Exception as e:  # a bug of the workload itself: fail, whatever the time
                with self.lock:
                    self.errors.append((float("-inf"), f"worker {w}: {what}: {e!r}"))
                return

    # -- the cp thread

    def _cp_worker(self) -> None:
        rng = self.rngs[WORKERS]
        batch = 0
        while not self.stop.is_set():
            batch += 1
            src = os.path.join(self.scratch, f"r{self.round}b{batch}")
            os.makedirs(src)
            files = {}
            for i in range(rng.randrange(3, 12)):
                name = f"cp-r{self.round}b{batch}-{i}.jpg"
                data = self._data(rng)
                write(os.path.join(src, name), data)
                files[name] = sha256(data)
            album = rng.choice(self._albums())
            tracked = []
            for name in sorted(files):
                f = Tracked(name=name, owner=-1)
                f.begin()
                tracked.append(f)
            with self.lock:
                self.model.files += tracked
            cmd = ["cp", *[os.path.join(src, n) for n in sorted(files)], self.p(album) + "/"]
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
            with self.lock:
                self.cp_procs.append(proc)
            try:
                _, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            if proc.returncode != 0:
                with self.lock:
                    self.errors.append((time.monotonic(), f"cp into {album}: exit {proc.returncode}: "
                                        f"{err.decode(errors='replace').strip()}"))
                return
            for f in tracked:
                f.done(State(paths=(f"{album}/{f.name}",), ino=None, sha=files[f.name]))
            with self.lock:
                self.ops += 1
            shutil.rmtree(src, ignore_errors=True)

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def join(self, timeout: float) -> list[str]:
        """Stop and wait for every thread; the names of those still blocked after timeout."""
        self.stop.set()
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        stuck = [t.name for t in self.threads if t.is_alive()]
        for p in self.cp_procs:
            if p.poll() is None:
                p.kill()
        return stuck


# --- the checks -------------------------------------------------------------------------


def is_side_file_name(name: str) -> bool:
    """SEMANTICS.md § Files that are not photos: names whose new files never become assets."""
    return (name.startswith(".") or name in ("Thumbs.db", "desktop.ini") or name.startswith("~$")
            or (name.endswith(".part") and name != ".part") or name.endswith(".crdownload"))


def recently_deleted_name(mp, ino: int) -> str:
    """The name under which Recently Deleted shows inode `ino` (the roll's name, or a (n) form)."""
    directory = os.path.join(mp, "Recently Deleted")
    for name in os.listdir(directory):
        try:
            if os.lstat(os.path.join(directory, name)).st_ino == ino:
                return name
        except FileNotFoundError:
            continue   # another worker restored or purged its own file meanwhile
    raise AssertionError(f"inode {ino} is not in Recently Deleted")


def check_library(mp, model: Model) -> dict:
    """Everything the module docstring promises about a remounted library. Returns counts."""
    problems: list[str] = []
    roll_dir = os.path.join(mp, "Camera Roll")

    roll: dict[int, list[str]] = {}
    content: dict[int, str] = {}
    for name in os.listdir(roll_dir):
        p = os.path.join(roll_dir, name)
        st = os.lstat(p)
        if not stat.S_ISREG(st.st_mode):
            problems.append(f"Camera Roll/{name}: not a regular file")
            continue
        roll.setdefault(st.st_ino, []).append(name)
        try:
            n, digest = read_digest(p)
        except OSError as e:
            problems.append(f"Camera Roll/{name}: read fails: {e}")
            continue
        if n != st.st_size:
            problems.append(f"Camera Roll/{name}: st_size {st.st_size} but {n} bytes read")
        content[st.st_ino] = digest
    for i, ns in roll.items():
        if len(ns) > 1:
            problems.append(f"inode {i} is in the roll {len(ns)} times: {ns}")

    album_refs: dict[int, list[str]] = {}
    album_dirs = set()
    for dirpath, dirs, files in os.walk(os.path.join(mp, "Albums")):
        rel_dir = os.path.relpath(dirpath, mp)
        album_dirs.add(rel_dir)
        for name in files:
            rel = os.path.join(rel_dir, name)
            st = os.lstat(os.path.join(dirpath, name))
            if is_side_file_name(name) and st.st_ino not in roll:
                # A temporary (dot) file a killed update left: a side file of its album, in no roll.
                if st.st_nlink != 1:
                    problems.append(f"{rel}: a side file with st_nlink {st.st_nlink}")
                continue
            album_refs.setdefault(st.st_ino, []).append(rel)
            if st.st_ino not in roll:
                problems.append(f"{rel}: inode {st.st_ino} is in an album but not in the roll (half-linked)")
    for i, ns in roll.items():
        st = os.lstat(os.path.join(roll_dir, ns[0]))
        want = 1 + len(album_refs.get(i, []))
        if st.st_nlink != want:
            problems.append(f"Camera Roll/{ns[0]}: st_nlink {st.st_nlink}, but 1 + {want - 1} album entries")

    recently_deleted: dict[int, str] = {}
    deleted_dir = os.path.join(mp, "Recently Deleted")
    for name in os.listdir(deleted_dir):
        st = os.lstat(os.path.join(deleted_dir, name))
        if st.st_ino in recently_deleted:
            problems.append(f"inode {st.st_ino} is in Recently Deleted twice")
        recently_deleted[st.st_ino] = name
        if st.st_ino in roll or st.st_ino in album_refs:
            problems.append(f"Recently Deleted/{name}: inode {st.st_ino} is also live at "
                            f"{roll.get(st.st_ino, []) + album_refs.get(st.st_ino, [])}")
        if st.st_nlink != 1:
            problems.append(f"Recently Deleted/{name}: st_nlink {st.st_nlink}, want 1")

    everywhere = set(roll) | set(album_refs)
    checked = 0
    for a in model.albums:
        if a not in album_dirs:
            problems.append(f"album {a}: its mkdir returned before the kill, but it is missing")
    for f in model.files:
        s = f.state
        checked += 1
        ino = s.ino
        for rel in s.paths:
            p = os.path.join(mp, rel)
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                problems.append(f"{rel}: missing (its last operation returned before the kill)")
                continue
            if ino is None:
                ino = st.st_ino
            if st.st_ino != ino:
                problems.append(f"{rel}: inode {st.st_ino}, want {ino}")
                continue
            n, digest = read_digest(p)
            if digest != s.sha:
                problems.append(f"{rel}: content differs ({n} bytes, sha256 {digest[:12]}, want {s.sha[:12]})")
        if ino is not None:
            if s.in_roll and ino not in roll:
                problems.append(f"{f.name} (inode {ino}): its asset is not in the roll")
            elif s.in_roll and content.get(ino) != s.sha:
                problems.append(f"{f.name} (inode {ino}): the roll entry's content differs")
            if not s.in_roll and ino in everywhere:
                problems.append(f"{f.name} (inode {ino}): deleted before the kill, but still at "
                                f"{roll.get(ino, []) + album_refs.get(ino, [])}")
            if s.deleted:
                name = recently_deleted.get(ino)
                if name is None:
                    problems.append(f"{f.name} (inode {ino}): deleted before the kill, but not in Recently Deleted")
                elif read_digest(os.path.join(deleted_dir, name))[1] != s.sha:
                    problems.append(f"Recently Deleted/{name}: content differs")
            elif ino in recently_deleted:
                problems.append(f"{f.name} (inode {ino}): in Recently Deleted as {recently_deleted[ino]}, "
                                f"but its last operation {'restored' if s.in_roll else 'purged'} it")
        if s.original is not None and s.in_roll and ino is not None and ino in roll:
            # Never an edit without its original: Originals/ shows the first version under the roll name.
            shown = os.path.join(mp, "Smart Albums", "Originals", roll[ino][0])
            want_ino, want_sha = s.original
            try:
                st = os.lstat(shown)
                if want_ino is not None and st.st_ino != want_ino:
                    problems.append(f"{f.name}: its original is inode {st.st_ino}, want {want_ino}")
                elif read_digest(shown)[1] != want_sha:
                    problems.append(f"{f.name}: its original's content differs from the first version")
            except FileNotFoundError:
                problems.append(f"{f.name} (inode {ino}): edited before the kill, but no original at {shown}")
        for g in s.gone:
            if g in everywhere:
                problems.append(f"{f.name}: inode {g}, replaced by an update before the kill, is still at "
                                f"{roll.get(g, []) + album_refs.get(g, [])}")
        for rel in s.absent:
            if os.path.lexists(os.path.join(mp, rel)):
                problems.append(f"{rel}: still exists, though an operation that returned before the kill "
                                "moved or removed it")
        if ino is not None and s.ino is None:
            f.history[-1] = (f.history[-1][0], dataclasses.replace(s, ino=ino))
    assert not problems, f"{len(problems)} problems after the crash:\n  " + "\n  ".join(problems[:60])
    return {"roll": len(roll), "album entries": sum(len(v) for v in album_refs.values()), "checked": checked}


def setup_library(m, model: Model, rng: random.Random) -> None:
    """Shared albums and a few committed files per worker, so the workload has work at once."""
    for a in SHARED_ALBUMS:
        os.makedirs(os.path.join(m.mp, a))
        model.albums[a] = float("-inf")
    for w in range(WORKERS):
        for k in range(6):
            f = Tracked(name=f"w{w}base{k}", owner=w)
            data = rng.randbytes(rng.randrange(0, 32 * 1024))
            in_album = k < 4
            rel = f"{rng.choice(SHARED_ALBUMS)}/{f.name}.jpg" if in_album else f"Camera Roll/{f.name}.jpg"
            write(os.path.join(m.mp, rel), data)
            f.history = [(float("-inf"), State(paths=(rel,), ino=os.lstat(os.path.join(m.mp, rel)).st_ino,
                                               sha=sha256(data), in_album=in_album))]
            model.files.append(f)
