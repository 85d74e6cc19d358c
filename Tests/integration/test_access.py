"""Access (issue 3 part 6): the store is private, the mount belongs to the mounting user, and with
-o allow_other the kernel enforces the files' permissions (default_permissions) for others.

The second user is nobody (uid/gid 65534, no supplementary groups), through setpriv. Mount points
live under a 0755 directory in /tmp, so that a refusal comes from albumfs/FUSE and not from a
parent directory nobody cannot traverse (pytest's tmp_path is under a 0700 directory).
"""

from __future__ import annotations

import os
import stat

import pytest

from albumfs_testlib import NOBODY, as_user, payload, read, sha256, write

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching to another uid needs root")

DENIED = "Permission denied"          # EACCES, as coreutils print it with LC_ALL=C
NOT_PERMITTED = "Operation not permitted"   # EPERM


def denied(p, *, allow_eperm: bool = False) -> bool:
    return p.returncode != 0 and (DENIED in p.stderr or (allow_eperm and NOT_PERMITTED in p.stderr))


@pytest.mark.parametrize("how", ["store-path-missing", "empty-dir-exists"])
def test_new_store_is_private(pub, mount_factory, how):
    """Store: after the first mount the store directory is 0700 (whether albumfs made the directory
    or found it empty, mode 0755), and nobody can list it or read its database."""
    store = pub / "store"
    if how == "empty-dir-exists":
        store.mkdir()
        os.chmod(store, 0o755)
    m = mount_factory("m", store=store, make_store=False)
    write(m.roll / "secret name.jpg", b"x")
    m.unmount()
    modes = {n: f"{stat.S_IMODE(os.stat(store / n).st_mode):o}" for n in (".", "library.sqlite")}
    assert as_user(["stat", pub]).returncode == 0, "control: nobody can traverse the parent directory"
    refused = denied(as_user(["cat", store / "library.sqlite"]))
    assert refused, f"nobody can read the store's database (modes: {modes}): every photo's name and xattrs"
    p = as_user(["ls", store])
    refused = denied(p)
    assert refused, f"nobody can list the store (modes: {modes}): {p.stdout!r}"
    assert modes["."] == "700", f"store directory mode {modes['.']} after the first mount, want 700"


def test_without_allow_other_only_the_mounting_user_gets_in(pub, mount_factory):
    """Default: only the mounting user can use the mount; nobody cannot stat the mount point, list
    the roll, or read a 0644 file (EACCES)."""
    m = mount_factory("m", mp=pub / "mnt")
    write(m.roll / "open.jpg", b"readable by all")
    os.chmod(m.roll / "open.jpg", 0o644)
    assert as_user(["stat", pub]).returncode == 0, "control: nobody can traverse the parent directory"
    for cmd in (["stat", m.mp], ["ls", m.roll], ["cat", m.roll / "open.jpg"],
                ["touch", m.mp / "Albums" / "x"]):
        p = as_user(cmd)
        refused = denied(p, allow_eperm=True)
        assert refused, f"nobody: {' '.join(map(str, cmd))}: exit {p.returncode} {p.stderr!r}"
    assert read(m.roll / "open.jpg") == b"readable by all", "the mounting user is unaffected"


def test_allow_other_enforces_file_permissions(pub, mount_factory):
    """-o allow_other: nobody lists the roll (0755) but cannot create, delete, chmod or mkdir there
    (EACCES / EPERM); cannot read a root file chmod 0600 but reads one chmod 0644 (not write it);
    in an album chmod 0777 nobody can add a file, owned by nobody, in the album and the roll."""
    m = mount_factory("m", mp=pub / "mnt", options=["allow_other"])
    (m.albums / "Shared").mkdir()
    write(m.roll / "private.jpg", payload(5000, "private"))
    os.chmod(m.roll / "private.jpg", 0o600)
    write(m.albums / "Shared" / "public.jpg", payload(6000, "public"))
    os.chmod(m.albums / "Shared" / "public.jpg", 0o644)
    os.setxattr(m.roll / "private.jpg", "user.note", b"hidden")
    os.setxattr(m.roll / "public.jpg", "user.note", b"visible")
    os.link(m.roll / "private.jpg", m.albums / "Shared" / "p.jpg")

    ls = as_user(["ls", m.roll])
    assert ls.returncode == 0, ls.stderr
    assert sorted(ls.stdout.split("\n")[:-1]) == ["private.jpg", "public.jpg"]
    ls = as_user(["ls", m.albums / "Shared"])
    assert ls.returncode == 0 and ls.stdout == "p.jpg\npublic.jpg\n", (ls.stdout, ls.stderr)

    checks = {
        "create in the roll": (["touch", m.roll / "mine.jpg"], False),
        "create in a root album (0755)": (["touch", m.albums / "Shared" / "mine.jpg"], False),
        "mkdir in Albums": (["mkdir", m.albums / "Mine"], False),
        "rm from the roll": (["rm", "-f", m.roll / "public.jpg"], False),
        "rm from a root album": (["rm", "-f", m.albums / "Shared" / "public.jpg"], False),
        "read a 0600 file": (["cat", m.roll / "private.jpg"], False),
        "read a 0600 file through an album name": (["cat", m.albums / "Shared" / "p.jpg"], False),
        "write a 0644 file": (["sh", "-c", 'echo x >> "$1"', "sh", m.albums / "Shared" / "public.jpg"], False),
        "truncate a 0644 file": (["truncate", "-s", "0", m.roll / "public.jpg"], False),
        "chmod a root file": (["chmod", "666", m.roll / "public.jpg"], True),
        "touch -d a root file": (["touch", "-d", "2001-01-01", m.roll / "public.jpg"], True),
        "xattr of a 0600 file": (["getfattr", "-n", "user.note", m.roll / "private.jpg"], False),
        "set an xattr on a 0644 file": (["setfattr", "-n", "user.x", "-v", "1", m.roll / "public.jpg"], True),
    }
    wrong = []
    for what, (cmd, eperm_ok) in checks.items():
        p = as_user(cmd)
        if not denied(p, allow_eperm=eperm_ok):
            wrong.append(f"{what}: exit {p.returncode}, stderr {p.stderr.strip()!r}")
    assert not wrong, "nobody was not refused:\n  " + "\n  ".join(wrong)

    got = as_user(["sha256sum", m.roll / "public.jpg"])
    assert got.returncode == 0, f"nobody cannot read a 0644 file: {got.stderr!r}"
    assert got.stdout.split()[0] == sha256(payload(6000, "public"))
    x = as_user(["getfattr", "--only-values", "-n", "user.note", m.roll / "public.jpg"])
    assert x.returncode == 0 and x.stdout == "visible", (x.returncode, x.stdout, x.stderr)
    assert read(m.roll / "public.jpg") == payload(6000, "public"), "nobody's attempts changed the file"
    assert sorted(os.listdir(m.roll)) == ["private.jpg", "public.jpg"]
    assert os.listdir(m.albums) == ["Shared"]

    os.chmod(m.albums / "Shared", 0o777)
    src = pub / "src.jpg"
    src.write_bytes(payload(7000, "nobody's"))
    os.chmod(src, 0o644)
    p = as_user(["cp", src, m.albums / "Shared" / "from-nobody.jpg"])
    assert p.returncode == 0, f"nobody cannot add a file to a 0777 album: {p.stderr!r}"
    for path in (m.albums / "Shared" / "from-nobody.jpg", m.roll / "from-nobody.jpg"):
        st = os.stat(path)
        assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY), f"{path}: owner {st.st_uid}:{st.st_gid}"
        assert read(path) == payload(7000, "nobody's")
    p = as_user(["rm", m.albums / "Shared" / "from-nobody.jpg"])
    assert p.returncode == 0, f"nobody cannot remove its entry from a 0777 album: {p.stderr!r}"
    assert "from-nobody.jpg" in os.listdir(m.roll), "rm of an album entry must not delete the asset"
