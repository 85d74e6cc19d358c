"""Set-user-ID and set-group-ID bits (SEMANTICS.md § Durability and safety): every mount is
nosuid,nodev, however it is mounted, and the bits are cleared where ext4 clears them: a write or a
truncate by a caller without CAP_FSETID (anyone but root), and a chown (the set-user-ID bit by
anyone, the set-group-ID bit when the file is group-executable, or the caller is not root and not
in the file's group). On both data paths: through the daemon and FUSE passthrough.

The other user is nobody (uid/gid 65534), through setpriv; the mounts are -o allow_other under a
0755 directory so that nobody can reach them.
"""

from __future__ import annotations

import os
import stat

import pytest

from albumfs_testlib import NOBODY, as_user, mount_entry, run, write
from test_data_paths import MODES, NO_PASSTHROUGH

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching to another uid needs root")


@pytest.fixture(params=[pytest.param("passthrough", marks=NO_PASSTHROUGH), "daemon"])
def shared_mount(request, pub, mount_factory):
    """A mount nobody can use (allow_other), on the given data path."""
    m = mount_factory("m", mp=pub / "mnt", options=MODES[request.param] + ["allow_other"])
    m.mode_options = MODES[request.param] + ["allow_other"]   # for its remounts
    return m


def mode_of(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def asset(m, name: str, mode: int, owner: int = 0) -> str:
    path = m.roll / name
    write(path, b"0123456789")
    os.chown(path, owner, owner)
    os.chmod(path, mode)
    assert mode_of(path) == mode
    return str(path)


@pytest.mark.parametrize("options", [["suid", "dev"], ["dev,suid"], []])
def test_every_mount_is_nosuid_nodev(mount_factory, options):
    """SEMANTICS.md § Durability and safety: suid and dev are accepted and have no effect."""
    m = mount_factory("m", options=options)
    opts = mount_entry(m.mp)[3].split(",")
    assert "nosuid" in opts and "nodev" in opts, opts


WRITES = {
    "write": ["sh", "-c", 'printf x >> "$0"'],
    "truncate": ["truncate", "-s", "3"],
    "open O_TRUNC and write": ["sh", "-c", 'printf x > "$0"'],
}


@pytest.mark.parametrize("how", list(WRITES))
@pytest.mark.parametrize("mode, expected", [(0o6777, 0o777), (0o4777, 0o777), (0o2777, 0o777)],
                         ids=["6777", "4777", "2777"])
def test_write_by_another_user_clears_set_id_bits(shared_mount, how, mode, expected):
    """pjdfstest chmod/12.t: a write or truncate by a non-root caller clears the bits."""
    path = asset(shared_mount, "x.jpg", mode)
    p = as_user([*WRITES[how], path])
    assert p.returncode == 0, p.stderr
    assert mode_of(path) == expected, f"{how} by nobody: mode {mode_of(path):o}, want {expected:o}"
    shared_mount.remount(shared_mount.mode_options)
    assert mode_of(path) == expected, "after a remount"


@pytest.mark.parametrize("how", list(WRITES))
def test_write_by_root_keeps_set_id_bits(shared_mount, how):
    """A caller with CAP_FSETID (root) keeps the bits, as on ext4."""
    path = asset(shared_mount, "x.jpg", 0o6777)
    run([*WRITES[how], path])
    assert mode_of(path) == 0o6777


@pytest.mark.parametrize("mode, by_owner, by_root", ids=["6555", "4555", "2555", "2444"], argvalues=[
    (0o6555, 0o555, 0o555),     # group-executable: both bits go, whoever chowns
    (0o4555, 0o555, 0o555),
    (0o2555, 0o555, 0o555),
    (0o2444, 0o2444, 0o2444),   # set-group-ID without group execute: kept (owner is in the group)
])
def test_chown_clears_set_id_bits(shared_mount, mode, by_owner, by_root):
    """pjdfstest chown/00.t: a chown by the owner, and by root, clears the set-user-ID bit, and the
    set-group-ID bit of a group-executable file."""
    path = asset(shared_mount, "mine.jpg", mode, owner=NOBODY)
    p = as_user(["chown", f"{NOBODY}:{NOBODY}", path])
    assert p.returncode == 0, p.stderr
    assert mode_of(path) == by_owner, f"chown by the owner: mode {mode_of(path):o}, want {by_owner:o}"
    os.chmod(path, mode)
    os.chown(path, 0, 0)
    assert mode_of(path) == by_root, f"chown by root: mode {mode_of(path):o}, want {by_root:o}"
    os.chmod(path, mode)
    os.chown(path, -1, -1)     # names no id, and still clears them on ext4
    assert mode_of(path) == by_root, f"chown(f, -1, -1): mode {mode_of(path):o}, want {by_root:o}"


def test_chown_by_a_caller_outside_the_group_clears_set_group_id(shared_mount):
    """A non-executable set-group-ID file chowned by its owner, who is not in its group: cleared
    (setattr_should_drop_sgid)."""
    path = asset(shared_mount, "g.jpg", 0o2644, owner=NOBODY)
    os.chown(path, NOBODY, 0)
    os.chmod(path, 0o2644)
    p = as_user(["chown", str(NOBODY), path])
    assert p.returncode == 0, p.stderr
    assert mode_of(path) == 0o644
