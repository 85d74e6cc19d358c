"""SEMANTICS.md § Visibility: when a call returns, every path shows its effect, also names in
other directories that the call changed. Every check runs right after the call returned, with
no retry and no sleep: the kernel's caches were filled with the old names first."""

from __future__ import annotations

import errno
import os
import re
import signal
import threading
import time

import pytest

from albumfs_testlib import abort_fuse_connection, expect_errno, index_wait, ino, names, thread_stacks, write

CYCLES = 250   # × 4 operations


def test_a_thousand_changes_are_visible_everywhere_at_once(mount):
    """1,000 updates, deletes, restores and creates in a row, each followed at once by a stat or
    listdir of every name it changed in another directory: zero stale answers."""
    a, b = mount.albums / "A", mount.albums / "B"
    a.mkdir()
    b.mkdir()
    deleted = mount.mp / "Recently Deleted"
    stale = []

    def check(what, condition):
        if not condition:
            stale.append(what)

    for i in range(CYCLES):
        x, y, z = f"x{i}.jpg", f"y{i}.jpg", f"z{i}.jpg"
        write(a / x, b"old")
        os.link(a / x, b / x)
        write(a / y, b"y")
        os.link(a / y, b / y)
        # Fill the kernel's caches with what is about to change.
        old = ino(b / x)
        ino(mount.roll / x), ino(a / y), ino(b / y), ino(mount.roll / y)
        names(b), names(mount.roll), names(deleted)

        # 1. An update in A: B's entry and the roll's are handed to the new asset.
        write(a / f".{x}.tmp", b"new")
        os.rename(a / f".{x}.tmp", a / x)
        new = ino(a / x)
        check(f"update {x}: B/{x}", ino(b / x) == new)
        check(f"update {x}: roll", ino(mount.roll / x) == new)
        # The first version is the original now (SEMANTICS.md § Edits keep the original).
        check(f"update {x}: Originals", ino(mount.mp / "Smart Albums" / "Originals" / x) == old)

        # 2. A delete from the roll: gone from both albums, in Recently Deleted.
        os.unlink(mount.roll / y)
        for p in (a / y, b / y):
            try:
                os.stat(p)
                stale.append(f"delete {y}: {p} still there")
            except FileNotFoundError:
                pass
        check(f"delete {y}: listing of B", y not in names(b))
        check(f"delete {y}: Recently Deleted", y in names(deleted))

        # 3. A restore: back in the roll and both albums.
        os.rename(deleted / y, mount.roll / y)
        check(f"restore {y}: A", os.path.exists(a / y))
        check(f"restore {y}: B", y in names(b))
        check(f"restore {y}: Recently Deleted", y not in names(deleted))

        # 4. A create in an album: its roll entry is there.
        write(a / z, b"z")
        check(f"create {z}: roll", ino(mount.roll / z) == ino(a / z))
        check(f"create {z}: roll listing", z in names(mount.roll))

        if len(stale) > 20:
            break
    assert not stale, f"{len(stale)} stale answers right after a call returned:\n  " + "\n  ".join(stale[:20])
    expect_errno(errno.ENOENT, os.stat, mount.roll / f".x0.jpg.tmp")


def kernel_version() -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", os.uname().release).groups()
    return int(major), int(minor)


@pytest.mark.skipif(kernel_version() < (6, 16), reason="FUSE_NOTIFY_INC_EPOCH is Linux 6.16+: on older kernels "
                    "these names go right after the reply (docs/DESIGN.md, 'Kernel caches and visibility')")
def test_names_a_rename_changes_in_its_own_directories_are_gone_when_it_returns(mount):
    """§ Visibility, the hard case: `mv Albums/A/x "Camera Roll/y"` renames the asset's roll entry
    too, in a directory the rename itself has locked (the kernel lets go of it only after the
    reply). Right after each rename returns, the old roll name is gone: 300 times, no retry."""
    a = mount.albums / "A"
    a.mkdir()
    stale = []
    for i in range(300):
        old, album_name, new = f"o{i}.jpg", f"x{i}.jpg", f"y{i}.jpg"
        write(mount.roll / old, b"x")
        os.link(mount.roll / old, a / album_name)
        ino(mount.roll / old)   # the kernel caches the old roll name
        os.rename(a / album_name, mount.roll / new)
        try:
            os.stat(mount.roll / old)
            stale.append(old)
        except FileNotFoundError:
            pass
    assert not stale, f"{len(stale)} of 300 old roll names still there right after the rename: {stale[:10]}"


def names_sent_through_the_queue(log: str) -> int:
    """Requests whose names went to the kernel before their reply (through the Invalidator's
    queue), from the daemon's line at unmount."""
    found = re.findall(r"name invalidations before the reply: (\d+) requests sent theirs through the queue", log)
    assert found, "the daemon logged no count of name invalidations at unmount"
    return int(found[-1])


@pytest.mark.parametrize("threads", ["multi", "single"])
def test_names_a_purge_or_a_delete_changes_elsewhere_are_gone_when_it_returns(mount, threads):
    """§ Visibility, as `rm` in the roll and a file manager's Empty Trash run: a delete takes the
    asset's names out of its albums, a purge (unlink in the trash's files/) its name out of
    Recently Deleted and its .trashinfo out of info/. Each of those names is cached first, and
    is gone right after the call returns (no retry). A stale Recently Deleted name would still
    answer ENOENT (its node is gone), so the check there is the next photo deleted under that
    name: it must be the one found. On both loops (multi-threaded, and -s) the names go through
    the Invalidator's queue (docs/DESIGN.md, "Kernel caches and visibility"), which the unmount
    log counts."""
    if threads == "single":
        mount.unmount()
        mount.start(flags=["-s"])
    a = mount.albums / "A"
    a.mkdir()
    deleted = mount.mp / "Recently Deleted"
    info, files = (mount.mp / f".Trash-{os.getuid()}" / d for d in ("info", "files"))
    count = 150
    photos = [f"p{i}.jpg" for i in range(count)]
    for x in photos:
        write(mount.roll / x, b"p")
        os.link(mount.roll / x, a / x)
    stale = []
    for x in photos:
        ino(a / x)
        os.unlink(mount.roll / x)
        if os.path.lexists(a / x):
            stale.append(f"rm {x}: A/{x}")
    names(deleted), names(info), names(files)
    for x in photos:
        ino(deleted / x), ino(info / f"{x}.trashinfo")
        os.unlink(files / x)
        if os.path.lexists(info / f"{x}.trashinfo"):
            stale.append(f"purge {x}: info/{x}.trashinfo")
        write(mount.roll / x, b"again")
        again = ino(mount.roll / x)
        os.unlink(mount.roll / x)
        try:
            if ino(deleted / x) != again:
                stale.append(f"purge {x}: Recently Deleted/{x} is the purged photo")
        except FileNotFoundError:
            stale.append(f"purge {x}: Recently Deleted/{x} not found after another {x} was deleted")
    assert not stale, f"{len(stale)} stale names right after a call returned: {stale[:10]}"
    mount.unmount()
    assert names_sent_through_the_queue(mount.log_text()) >= 2 * count


def _kernel_stack(tid: int) -> str:
    """The kernel stack of one of this process's threads (root only)."""
    with open(f"/proc/self/task/{tid}/stack") as f:
        return f.read()


def _where(call, markers: tuple[str, ...], timeout: float = 30) -> str:
    """Where a caller thread of this test got to while the daemon is stopped: "there" (a kernel
    function in `markers` is on its stack), "daemon" (it waits for an answer to some other
    request, e.g. a GETATTR for a permission check whose attributes a background change
    dropped), or "done". Polled: the kernel has no event for "this thread now sleeps on a lock",
    and what is polled is the test's own thread, never an answer of the mount (the daemon is
    stopped meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        if call.done:
            return "done"
        if call.tid is not None:
            stack = _kernel_stack(call.tid)
            if any(m in stack for m in markers):
                return "there"
            if "request_wait_answer" in stack:
                return "daemon"
        if time.monotonic() > deadline:
            pytest.fail(f"a caller got nowhere in {timeout:.0f} s:\n{_kernel_stack(call.tid)}", pytrace=False)
        time.sleep(0.01)


class _Call:
    """One system call on a thread of its own, with what came of it."""

    def __init__(self, fn, *args):
        self.tid, self.done, self.error = None, False, None
        self.thread = threading.Thread(target=self._run, args=(fn, *args), daemon=True)

    def _run(self, fn, *args):
        self.tid = threading.get_native_id()
        try:
            fn(*args)
        except OSError as e:
            self.error = e
        self.done = True


@pytest.mark.skipif(os.geteuid() != 0, reason="reads its threads' kernel stacks (/proc/self/task/*/stack)")
@pytest.mark.parametrize("other", ["rename", "link"])
def test_a_delete_never_waits_for_a_directory_whose_holder_waits_for_the_delete(mount, other):
    """§ Visibility without a deadlock (docs/DESIGN.md, "Kernel caches and visibility"). `rm` of a
    roll photo that is in album A holds the roll and the photo's lock while the daemon takes it
    out of A and puts it in Recently Deleted; the names that changed there are sent to the kernel,
    which takes each name's directory lock to drop it. Another caller may hold such a directory
    while it waits, in the kernel, for a lock the `rm` holds: `mv "Camera Roll/z.jpg" Albums/A/`
    (a file manager's drag into an album) locks A, its target's directory, first and then waits
    for the roll; an `ln` of the photo into A holds A while it looks up the new name, then waits
    for the photo. The daemon must still answer both.

    The race is made exact: the daemon is stopped (SIGSTOP) while the `rm`'s UNLINK waits for
    it, so the `rm` holds its locks while the other caller blocks in the kernel holding A; then
    the daemon goes on. A background change (the facts of the new photos) can drop a
    directory's attributes first, and then a caller's path walk needs the stopped daemon for a
    permission check: such an attempt proves nothing, is let run to its end (a hang is still a
    deadlock) and made again with new photos. A daemon that sent those names from the `rm`'s
    own request thread before replying hung here every time (and about 1 run in 10 of the pairs'
    racing test)."""
    a, deleted = mount.albums / "A", mount.mp / "Recently Deleted"
    a.mkdir()
    held = ("lock_two_directories",) if other == "rename" else ("filename_create", "vfs_link")
    for attempt in range(10):
        x, z = f"x{attempt}.jpg", f"z{attempt}.jpg"
        write(mount.roll / x, b"x")
        os.link(mount.roll / x, a / x)
        write(mount.roll / z, b"z")
        rm = _Call(os.unlink, mount.roll / x)
        second = (_Call(os.rename, mount.roll / z, a / z) if other == "rename"
                  else _Call(os.link, mount.roll / x, a / f"{x}-2"))
        # Nothing on the way should need the daemon: the facts read, every directory's
        # attributes fresh (permission checks), every name cached (the rename's target is looked
        # up under its locks).
        index_wait(mount.mp)
        for path in (mount.mp, mount.roll, mount.albums, a, mount.roll / x, a / x, mount.roll / z):
            os.stat(path)
        os.kill(mount.proc.pid, signal.SIGSTOP)
        try:
            rm.thread.start()
            exact = _where(rm, ("fuse_unlink",)) == "there"
            if exact:
                second.thread.start()
                exact = _where(second, held) == "there"
        finally:
            os.kill(mount.proc.pid, signal.SIGCONT)
        for call in (rm, second):
            if call.tid is not None:
                call.thread.join(timeout=30)
        hung = [role for role, call in (("rm", rm), (other, second)) if call.thread.is_alive()]
        if hung:
            stacks = thread_stacks(mount.proc.pid)
            aborted = abort_fuse_connection(mount.abort_file)
            pytest.fail(f"deadlock: {' and '.join(hung)} still blocked 30 s after the daemon went on "
                        f"(connection {'aborted' if aborted else 'NOT aborted'})\n--- daemon threads ---\n{stacks}",
                        pytrace=False)
        if exact:
            break
    else:
        pytest.fail("in 10 attempts a caller always needed the stopped daemon on its way", pytrace=False)
    assert rm.error is None, rm.error
    assert x in names(deleted) and x not in names(a), (names(deleted), names(a))
    if other == "rename":
        assert second.error is None, second.error
        assert z in names(a) and z in names(mount.roll), (names(a), names(mount.roll))
    else:
        # The ln came after the delete: what Recently Deleted holds cannot be linked (§ Hidden).
        assert second.error is not None and second.error.errno in (errno.ENOENT, errno.EPERM), second.error
        assert f"{x}-2" not in names(a), names(a)
