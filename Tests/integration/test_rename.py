"""mv, mkdir, rmdir and rm -r of albums and entries: SEMANTICS.md § What each operation does
(the rename rows), and § Visibility: names that a call changed in other directories are checked
right after it returned, with no retry."""

import errno
import os
import stat
import threading

import pytest

from albumfs_testlib import (
    RENAME_EXCHANGE, RENAME_NOREPLACE, all_entries, content_usage, expect_errno, ino, names,
    nlink, read, renameat2, run, write,
)

def albums(mount, *names_):
    out = []
    for n in names_:
        p = mount.albums / n
        os.makedirs(p)
        out.append(p)
    return out


# --- albums -------------------------------------------------------------------


def test_mv_album_renames_it(mount):
    """mv Albums/A Albums/B renames the album with everything in it."""
    (a,) = albums(mount, "A")
    write(a / "x.jpg", b"x")
    os.mkdir(a / "Sub")
    write(a / "Sub" / "y.jpg", b"y")
    os.chmod(a, 0o750)
    x, y = ino(a / "x.jpg"), ino(a / "Sub" / "y.jpg")

    run(["mv", a, mount.albums / "B"])
    b = mount.albums / "B"
    assert names(mount.albums) == ["B"]
    assert names(b) == ["Sub", "x.jpg"] and names(b / "Sub") == ["y.jpg"]
    assert ino(b / "x.jpg") == x and ino(b / "Sub" / "y.jpg") == y
    assert stat.S_IMODE(os.stat(b).st_mode) == 0o750
    assert names(mount.roll) == ["x.jpg", "y.jpg"]
    assert nlink(b / "x.jpg") == 2


def test_mv_album_into_another_album(mount):
    """mv Albums/A Albums/Trips/ moves the album, with its content, under Trips."""
    a, trips = albums(mount, "A", "Trips")
    write(a / "x.jpg", b"x")
    x = ino(a / "x.jpg")
    run(["mv", a, str(trips) + "/"])
    assert names(mount.albums) == ["Trips"]
    assert names(trips / "A") == ["x.jpg"]
    assert ino(trips / "A" / "x.jpg") == x
    assert names(mount.roll) == ["x.jpg"]


def test_mkdir_p_nested_albums(mount):
    """mkdir -p Albums/Trips/2024/Paris creates nested albums; mkdir of a taken name → EEXIST."""
    paris = mount.albums / "Trips" / "2024" / "Paris"
    run(["mkdir", "-p", paris])
    assert os.path.isdir(paris)
    assert names(mount.albums) == ["Trips"] and names(mount.albums / "Trips") == ["2024"]
    run(["mkdir", "-p", paris])  # again: fine
    expect_errno(errno.EEXIST, os.mkdir, paris)
    expect_errno(errno.EEXIST, os.mkdir, mount.albums / "Trips")
    write(paris / "eiffel.jpg", b"tower")
    assert names(mount.roll) == ["eiffel.jpg"]
    found = run(["find", mount.albums, "-type", "d"], text=True).stdout.split("\n")
    assert sorted(filter(None, found)) == sorted(
        [str(mount.albums), str(mount.albums / "Trips"), str(mount.albums / "Trips" / "2024"), str(paris)])


def test_mkdir_race_exactly_one_wins(mount):
    """mkdir row: two creators racing for one album name: exactly one wins, the others get EEXIST."""
    for round_ in range(10):
        target = mount.albums / f"R{round_}"
        barrier = threading.Barrier(4)
        results = []

        def creator():
            barrier.wait(timeout=30)
            try:
                os.mkdir(target)
                results.append("ok")
            except OSError as e:
                results.append(errno.errorcode.get(e.errno, str(e.errno)))

        threads = [threading.Thread(target=creator, daemon=True) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert sorted(results) == ["EEXIST"] * 3 + ["ok"], f"round {round_}: {results}"
    assert names(mount.albums) == sorted(f"R{i}" for i in range(10))


def test_rmdir_nonempty_album_is_enotempty(mount):
    """rmdir row: rmdir of an album holding an entry or a sub-album → ENOTEMPTY; empty → removed."""
    a, b = albums(mount, "A", "B/Sub")
    write(a / "x.jpg", b"x")
    assert run(["rmdir", a], check=False).returncode != 0
    expect_errno(errno.ENOTEMPTY, os.rmdir, a)
    expect_errno(errno.ENOTEMPTY, os.rmdir, mount.albums / "B")
    assert names(a) == ["x.jpg"]
    os.unlink(a / "x.jpg")
    run(["rmdir", a])
    run(["rmdir", b])
    run(["rmdir", mount.albums / "B"])
    assert names(mount.albums) == []
    assert names(mount.roll) == ["x.jpg"]


def test_rm_r_album_deletes_no_asset(mount):
    """rm -r Albums/A removes its references and sub-albums, but no asset."""
    albums(mount, "A/Sub")
    a = mount.albums / "A"
    write(a / "x.jpg", b"x" * 1000)
    write(a / "Sub" / "y.jpg", b"y" * 2000)
    os.mkdir(mount.albums / "Keep")
    os.link(a / "x.jpg", mount.albums / "Keep" / "x.jpg")
    usage = content_usage(mount.store)

    run(["rm", "-r", a])
    assert names(mount.albums) == ["Keep"]
    assert names(mount.roll) == ["x.jpg", "y.jpg"]
    assert read(mount.roll / "y.jpg") == b"y" * 2000
    assert nlink(mount.roll / "x.jpg") == 2 and nlink(mount.roll / "y.jpg") == 1
    assert content_usage(mount.store) == usage


# --- entries between albums and the roll ----------------------------------------


def test_mv_entry_between_albums(mount):
    """mv Albums/A/x Albums/B/ moves the reference from A to B; the roll entry stays."""
    a, b = albums(mount, "A", "B")
    write(a / "x.jpg", b"x")
    x = ino(a / "x.jpg")
    run(["mv", a / "x.jpg", str(b) + "/"])
    assert names(a) == [] and names(b) == ["x.jpg"]
    assert ino(b / "x.jpg") == x
    assert names(mount.roll) == ["x.jpg"] and nlink(mount.roll / "x.jpg") == 2


def test_move_keeping_name_leaves_numbered_roll_entry(mount):
    """mv row: a move between albums that keeps the name leaves the roll entry as it is."""
    a, b = albums(mount, "A", "B")
    write(mount.roll / "x.jpg", b"other")
    write(a / "x.jpg", b"mine")
    assert names(mount.roll) == ["x (2).jpg", "x.jpg"]
    run(["mv", a / "x.jpg", str(b) + "/"])
    assert names(mount.roll) == ["x (2).jpg", "x.jpg"]
    assert ino(mount.roll / "x (2).jpg") == ino(b / "x.jpg")


def test_rename_in_album_roll_entry_follows(mount):
    """mv Albums/A/x Albums/A/y: the roll entry named x follows to y."""
    (a,) = albums(mount, "A")
    write(a / "x.jpg", b"x")
    os.stat(mount.roll / "x.jpg")                       # cached: must not outlive the rename
    expect_errno(errno.ENOENT, os.stat, mount.roll / "y.jpg")  # cached negative entry, likewise
    run(["mv", a / "x.jpg", a / "y.jpg"])
    assert names(a) == ["y.jpg"]
    assert names(mount.roll) == ["y.jpg"]
    assert ino(mount.roll / "y.jpg") == ino(a / "y.jpg")
    expect_errno(errno.ENOENT, os.stat, mount.roll / "x.jpg")


def test_move_between_albums_with_new_name_roll_follows(mount):
    """mv Albums/A/x Albums/B/y: entry moved and renamed; the roll entry named x follows to y."""
    a, b = albums(mount, "A", "B")
    write(a / "x.jpg", b"x")
    run(["mv", a / "x.jpg", b / "y.jpg"])
    assert names(a) == [] and names(b) == ["y.jpg"]
    assert names(mount.roll) == ["y.jpg"]
    assert nlink(b / "y.jpg") == 2


@pytest.mark.parametrize("roll_name, follows", [
    ("x.jpg", True),
    ("x (2).jpg", True),
    ("x (17).jpg", True),
    ("z.jpg", False),
    ("x (02).jpg", False),   # leading zero: not a (n) form
    ("x (1).jpg", False),    # n < 2: not a (n) form
    ("x(2).jpg", False),     # no space: not a (n) form
])
def test_roll_follow_rule(mount, roll_name, follows):
    """mv row: the roll entry follows an album rename only when named x or an 'x (n)' form of it."""
    (a,) = albums(mount, "A")
    write(mount.roll / roll_name, b"asset")
    os.link(mount.roll / roll_name, a / "x.jpg")
    run(["mv", a / "x.jpg", a / "y.jpg"])
    assert names(mount.roll) == (["y.jpg"] if follows else [roll_name])
    assert names(a) == ["y.jpg"]


def test_roll_follow_from_numbered_name(mount):
    """mv row: roll entry 'x (2)' of album entry x follows the rename to y."""
    (a,) = albums(mount, "A")
    write(mount.roll / "x.jpg", b"other")
    write(a / "x.jpg", b"mine")
    run(["mv", a / "x.jpg", a / "y.jpg"])
    assert names(mount.roll) == ["x.jpg", "y.jpg"]
    assert read(mount.roll / "y.jpg") == b"mine" and read(mount.roll / "x.jpg") == b"other"


def test_roll_follow_takes_first_free_numbered_name(mount):
    """mv row: when the roll already has y, the following roll entry becomes 'y (2)'."""
    (a,) = albums(mount, "A")
    write(mount.roll / "y.jpg", b"other")
    write(a / "x.jpg", b"mine")
    run(["mv", a / "x.jpg", a / "y.jpg"])
    assert names(mount.roll) == ["y (2).jpg", "y.jpg"]
    assert ino(mount.roll / "y (2).jpg") == ino(a / "y.jpg")
    assert read(mount.roll / "y.jpg") == b"other"


def test_mv_roll_to_album_adds_and_stays_in_roll(mount):
    """mv 'Camera Roll/x' Albums/A/ adds the asset to A; it stays in the roll."""
    (a,) = albums(mount, "A")
    write(mount.roll / "x.jpg", b"x")
    x = ino(mount.roll / "x.jpg")
    run(["mv", mount.roll / "x.jpg", str(a) + "/"])
    assert names(a) == ["x.jpg"]
    assert names(mount.roll) == ["x.jpg"]
    assert ino(a / "x.jpg") == ino(mount.roll / "x.jpg") == x
    assert nlink(mount.roll / "x.jpg") == 2
    assert read(mount.roll / "x.jpg") == b"x"


def test_mv_album_to_roll_removes_reference_and_renames_roll_entry(mount):
    """mv Albums/A/x 'Camera Roll/y' removes the reference from A and renames the roll entry to y."""
    (a,) = albums(mount, "A")
    write(mount.roll / "orig.jpg", b"x")
    os.link(mount.roll / "orig.jpg", a / "x.jpg")
    assert nlink(mount.roll / "orig.jpg") == 2
    run(["mv", a / "x.jpg", mount.roll / "y.jpg"])
    assert names(a) == []
    assert names(mount.roll) == ["y.jpg"]
    expect_errno(errno.ENOENT, os.stat, mount.roll / "orig.jpg")
    expect_errno(errno.ENOENT, os.stat, a / "x.jpg")
    assert nlink(mount.roll / "y.jpg") == 1
    assert read(mount.roll / "y.jpg") == b"x"


def test_mv_album_to_roll_same_name_is_same_file(mount):
    """mv row: Albums/A/x and 'Camera Roll/x' are one file: rename(2) does nothing, mv refuses, rm drops it."""
    (a,) = albums(mount, "A")
    write(a / "x.jpg", b"x")
    os.rename(a / "x.jpg", mount.roll / "x.jpg")
    assert names(a) == ["x.jpg"] and names(mount.roll) == ["x.jpg"]
    assert run(["mv", a / "x.jpg", str(mount.roll) + "/"], check=False).returncode != 0
    assert names(a) == ["x.jpg"] and nlink(mount.roll / "x.jpg") == 2
    run(["rm", a / "x.jpg"])
    assert names(a) == [] and names(mount.roll) == ["x.jpg"]


def test_move_into_album_already_holding_asset_is_eexist(mount):
    """mv row: moving (from an album or the roll) into an album that holds the asset under another name → EEXIST."""
    a, b = albums(mount, "A", "B")
    write(a / "x.jpg", b"x")
    os.link(a / "x.jpg", b / "bx.jpg")
    write(b / "other.jpg", b"o")
    before = all_entries(mount.mp)
    expect_errno(errno.EEXIST, os.rename, a / "x.jpg", b / "y.jpg")
    expect_errno(errno.EEXIST, os.rename, mount.roll / "x.jpg", b / "z.jpg")
    # ... also when the move would replace another entry of B.
    expect_errno(errno.EEXIST, os.rename, a / "x.jpg", b / "other.jpg")
    assert all_entries(mount.mp) == before


# --- rename onto an existing name -----------------------------------------------


def test_rename_over_in_album_is_update(mount):
    """Same-directory rename-over (album): the moving asset takes the replaced one's roll name and album entries."""
    a, b = albums(mount, "A", "B")
    write(a / "x.jpg", b"old version")
    os.chmod(a / "x.jpg", 0o644)
    os.setxattr(a / "x.jpg", "user.v", b"old")
    os.link(a / "x.jpg", b / "bx.jpg")
    old = ino(a / "x.jpg")
    tmp = a / ".x.jpg.Ab12Cd"
    write(tmp, b"new version!")
    os.chmod(tmp, 0o600)
    os.utime(tmp, ns=(1_500_000_000_000_000_000, 1_500_000_000_123_456_789))
    os.setxattr(tmp, "user.v", b"new")
    new = ino(tmp)
    # The temporary is a side file of A until it is renamed (SEMANTICS.md § side files).
    assert names(mount.roll) == ["x.jpg"]
    for p in (b / "bx.jpg", mount.roll / "x.jpg"):
        os.stat(p)  # cache the entries that change hands

    os.rename(tmp, a / "x.jpg")
    assert names(a) == ["x.jpg"]
    assert names(mount.roll) == ["x.jpg"], "the roll shows one version, under the replaced asset's name"
    assert names(b) == ["bx.jpg"]
    def handed_over(path):
        st = os.stat(path)
        assert st.st_ino == new, f"{path} still names the replaced asset"
        return st

    for p in (a / "x.jpg", mount.roll / "x.jpg", b / "bx.jpg"):
        st = handed_over(p)
        assert st.st_nlink == 3
        assert read(p) == b"new version!"
        # Only entries change hands: the moving asset keeps its own mode, times and xattrs.
        assert stat.S_IMODE(st.st_mode) == 0o600
        assert st.st_mtime_ns == 1_500_000_000_123_456_789
        assert os.getxattr(p, "user.v") == b"new"
    assert old not in all_entries(mount.mp).values()
    expect_errno(errno.ENOENT, os.stat, mount.roll / ".x.jpg.Ab12Cd")


def test_update_where_album_held_both_keeps_moving_assets_entry(mount):
    """Update row: where an album held both assets, the moving asset's own entry stays, under its own name."""
    a, c = albums(mount, "A", "C")
    write(a / "x.jpg", b"old")
    write(a / "t.jpg", b"new")
    os.link(a / "x.jpg", c / "cx.jpg")
    os.link(a / "t.jpg", c / "ct.jpg")
    new = ino(a / "t.jpg")
    os.rename(a / "t.jpg", a / "x.jpg")
    assert names(a) == ["x.jpg"]
    assert names(c) == ["ct.jpg"]
    assert names(mount.roll) == ["x.jpg"]
    assert ino(c / "ct.jpg") == ino(mount.roll / "x.jpg") == ino(a / "x.jpg") == new
    assert nlink(a / "x.jpg") == 3


def test_rename_over_in_roll_is_update(mount):
    """Same-directory rename-over (roll): the moving asset takes the old one's album entries, same names."""
    (a,) = albums(mount, "A")
    write(mount.roll / "x.jpg", b"old")
    os.link(mount.roll / "x.jpg", a / "ax.jpg")
    old = ino(mount.roll / "x.jpg")
    write(mount.roll / ".x.jpg.tmp", b"new")
    new = ino(mount.roll / ".x.jpg.tmp")
    os.stat(a / "ax.jpg")

    run(["mv", mount.roll / ".x.jpg.tmp", mount.roll / "x.jpg"])
    assert names(mount.roll) == ["x.jpg"]
    assert names(a) == ["ax.jpg"]
    assert ino(mount.roll / "x.jpg") == ino(a / "ax.jpg") == new
    assert read(a / "ax.jpg") == b"new"
    assert nlink(a / "ax.jpg") == 2
    assert old not in all_entries(mount.mp).values()


def test_rename_over_across_albums_replaces_only_target_entry(mount):
    """Cross-directory rename-over into an album: the old asset loses that reference and stays in the roll."""
    a, b = albums(mount, "A", "B")
    write(a / "x.jpg", b"X")
    write(b / "x.jpg", b"Y")
    old, new = ino(a / "x.jpg"), ino(b / "x.jpg")
    assert names(mount.roll) == ["x (2).jpg", "x.jpg"]

    run(["mv", b / "x.jpg", a / "x.jpg"])
    assert names(a) == ["x.jpg"] and names(b) == []
    assert ino(a / "x.jpg") == new and read(a / "x.jpg") == b"Y"
    # The name did not change, so the roll entries stay as they were.
    assert names(mount.roll) == ["x (2).jpg", "x.jpg"]
    assert ino(mount.roll / "x.jpg") == old and nlink(mount.roll / "x.jpg") == 1
    assert ino(mount.roll / "x (2).jpg") == new and nlink(mount.roll / "x (2).jpg") == 2


def test_rename_over_into_roll_from_album_deletes_old_asset(mount):
    """Cross-directory rename-over into the roll: the old asset is deleted (from the roll and its albums)."""
    a, c = albums(mount, "A", "C")
    write(mount.roll / "x.jpg", b"X")
    os.link(mount.roll / "x.jpg", c / "cx.jpg")
    write(a / "y.jpg", b"Y")
    old, new = ino(mount.roll / "x.jpg"), ino(a / "y.jpg")
    os.stat(c / "cx.jpg")

    run(["mv", a / "y.jpg", mount.roll / "x.jpg"])
    assert names(mount.roll) == ["x.jpg"]
    assert ino(mount.roll / "x.jpg") == new and read(mount.roll / "x.jpg") == b"Y"
    assert names(a) == []
    assert names(c) == []
    expect_errno(errno.ENOENT, os.stat, c / "cx.jpg")
    assert old not in all_entries(mount.mp).values()
    assert nlink(mount.roll / "x.jpg") == 1


def test_rename_within_roll_keeps_album_names(mount):
    """Plain rename in the roll changes only the roll entry; album entries keep their names."""
    (a,) = albums(mount, "A")
    write(a / "x.jpg", b"x")
    run(["mv", mount.roll / "x.jpg", mount.roll / "y.jpg"])
    assert names(mount.roll) == ["y.jpg"]
    assert names(a) == ["x.jpg"]
    assert ino(a / "x.jpg") == ino(mount.roll / "y.jpg")


# --- renameat2 flags ----------------------------------------------------------------


def test_renameat2_exchange_is_einval(mount):
    """renameat2 RENAME_EXCHANGE → EINVAL, in the roll and in an album; nothing changes."""
    (a,) = albums(mount, "A")
    write(mount.roll / "p.jpg", b"p")
    write(mount.roll / "q.jpg", b"q")
    write(a / "r.jpg", b"r")
    write(a / "s.jpg", b"s")
    before = all_entries(mount.mp)
    expect_errno(errno.EINVAL, renameat2, mount.roll / "p.jpg", mount.roll / "q.jpg", RENAME_EXCHANGE)
    expect_errno(errno.EINVAL, renameat2, a / "r.jpg", a / "s.jpg", RENAME_EXCHANGE)
    assert all_entries(mount.mp) == before
    assert read(mount.roll / "p.jpg") == b"p" and read(a / "s.jpg") == b"s"


def test_renameat2_noreplace(mount):
    """renameat2 RENAME_NOREPLACE onto an existing name → EEXIST; onto a free name it renames."""
    (a,) = albums(mount, "A")
    write(mount.roll / "p.jpg", b"p")
    write(mount.roll / "q.jpg", b"q")
    write(a / "r.jpg", b"r")
    write(a / "s.jpg", b"s")
    before = all_entries(mount.mp)
    expect_errno(errno.EEXIST, renameat2, mount.roll / "p.jpg", mount.roll / "q.jpg", RENAME_NOREPLACE)
    expect_errno(errno.EEXIST, renameat2, a / "r.jpg", a / "s.jpg", RENAME_NOREPLACE)
    assert all_entries(mount.mp) == before
    renameat2(mount.roll / "p.jpg", mount.roll / "p2.jpg", RENAME_NOREPLACE)
    assert "p2.jpg" in names(mount.roll) and "p.jpg" not in names(mount.roll)
