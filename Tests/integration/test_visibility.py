"""SEMANTICS.md § Layout at the mount point, "Visibility": when a call returns, every path shows its
effect, also names in other directories that the call changed (the album entries an update hands
over, the album entries a delete from the roll removes, the roll entry a create in an album adds).
No retries: the first look after the call returned must be right.
"""

from __future__ import annotations

import errno
import os

import pytest

ROUNDS = 1000


@pytest.mark.mount_timeout(600)
def test_other_directories_are_current_when_the_call_returns(mount):
    """1,000 updates, deletes and creates in an album, each followed at once by a stat or listing
    of every affected name in other directories: zero stale answers."""
    a, b = mount.albums / "A", mount.albums / "B"
    a.mkdir()
    b.mkdir()
    roll = mount.roll
    (a / "cur.jpg").write_bytes(b"v0")
    os.link(a / "cur.jpg", b / "cur.jpg")
    stale: list[str] = []

    def check(ok: bool, what: str) -> None:
        if not ok:
            stale.append(what)

    for i in range(ROUNDS):
        kind = i % 3
        if kind == 0:
            # An update: a new version renamed over cur.jpg in A takes over B's entry and the roll's.
            for p in (b / "cur.jpg", roll / "cur.jpg"):
                try:
                    os.stat(p)   # cached: the name must not keep showing the replaced asset
                except FileNotFoundError:
                    stale.append(f"round {i}: {p}: ENOENT before the update (the last one still showing)")
            tmp = a / f".cur.jpg.{i}"
            tmp.write_bytes(b"v%d" % i)
            new = os.stat(tmp).st_ino
            os.rename(tmp, a / "cur.jpg")
            for p in (b / "cur.jpg", roll / "cur.jpg"):
                try:
                    check(os.stat(p).st_ino == new, f"round {i}: {p} still shows the replaced asset")
                except FileNotFoundError:
                    stale.append(f"round {i}: {p}: ENOENT right after the update")
        elif kind == 1:
            # A delete from the roll removes the asset's album entries.
            name = f"d{i}.jpg"
            (roll / name).write_bytes(b"d")
            os.link(roll / name, a / name)
            os.link(roll / name, b / name)
            for p in (a / name, b / name):
                os.stat(p)
            os.listdir(a)
            os.unlink(roll / name)
            for p in (a / name, b / name):
                try:
                    os.stat(p)
                    stale.append(f"round {i}: {p} still there after the roll delete")
                except FileNotFoundError:
                    pass
            check(name not in os.listdir(a), f"round {i}: listing of A still shows {name}")
        else:
            # A create in an album adds a roll entry.
            os.listdir(roll)
            name = f"c{i}.jpg"
            (b / name).write_bytes(b"c")
            check(name in os.listdir(roll), f"round {i}: the roll's listing lacks {name}")
            try:
                check(os.stat(roll / name).st_ino == os.stat(b / name).st_ino, f"round {i}: roll/{name} differs")
            except FileNotFoundError:
                stale.append(f"round {i}: roll/{name}: ENOENT right after the create")
            os.unlink(roll / name)
    assert not stale, f"{len(stale)} stale answers, e.g. {stale[:5]}"
