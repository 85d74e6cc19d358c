"""Installed like a system tool (README "Install"): scripts/install builds albumfs with the Swift
runtime linked in, and installs it with its man page, systemd units and bash completion; the
daemon tells systemd when the mount is live and stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from albumfs_testlib import REPO_ROOT, is_mounted, run


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("install") / "usr"
    run([REPO_ROOT / "scripts" / "install", "--prefix", prefix], timeout=1800)
    return prefix


def test_installed_files_and_a_binary_that_needs_no_toolchain(installed, tmp_path):
    """bin/albumfs, man page, user unit, system unit example, bash completion; ldd names no Swift
    library; the binary runs with an empty environment; man renders the page; systemd-analyze
    verify accepts both units."""
    binary = installed / "bin" / "albumfs"
    for path in (binary, installed / "share/man/man1/albumfs.1", installed / "lib/systemd/user/albumfs@.service",
                 installed / "share/doc/albumfs/albumfs.service",
                 installed / "share/bash-completion/completions/albumfs"):
        assert path.is_file(), f"{path} was not installed"
    libraries = run(["ldd", binary], text=True).stdout
    assert "swift" not in libraries.lower(), f"the binary links the Swift toolchain:\n{libraries}"
    assert run(["env", "-i", binary, "--version"], text=True).stdout.strip() == "albumfs 0.1.0"
    store = tmp_path / "store"
    run(["env", "-i", binary, "init", store])
    assert "assets: 0" in run(["env", "-i", binary, "stats", "--store", store], text=True).stdout
    page = run(["man", "-l", installed / "share/man/man1/albumfs.1"], text=True,
               env={**os.environ, "MANWIDTH": "80", "MANPAGER": "cat"}).stdout
    for word in ("SYNOPSIS", "EXIT STATUS", "FILES", "EXAMPLES", "trash_days", "albumfs stats"):
        assert word in page, f"the man page lacks {word}"
    # One source: the page's synopsis is the one --help shows, form by form.
    usage = run(["env", "-i", binary, "--help"], text=True).stdout
    forms = [" ".join(line.replace("usage:", "").split("  (")[0].split()) for line in usage.split("\n\n")[0].splitlines()]
    synopsis = " ".join(page.split("SYNOPSIS", 1)[1].split("DESCRIPTION", 1)[0].split())
    for form in forms:
        assert form.replace("…", "...") in synopsis, f"the man page's synopsis lacks {form!r}"
    assert f"ExecStart={binary} mount -f %f" in (installed / "lib/systemd/user/albumfs@.service").read_text()
    if shutil.which("systemd-analyze"):
        for unit in (installed / "lib/systemd/user/albumfs@.service", installed / "share/doc/albumfs/albumfs.service"):
            p = run(["systemd-analyze", "verify", unit], check=False, text=True,
                    env={**os.environ, "MANPATH": str(installed / "share/man")})
            assert p.returncode == 0 and not p.stderr.strip(), f"systemd-analyze verify {unit}:\n{p.stderr}"
    # --destdir: every path under it, the units still naming the prefix.
    staged = tmp_path / "staged"
    run([REPO_ROOT / "scripts" / "install", "--destdir", staged, "--prefix", "/opt/albumfs"], timeout=1800)
    assert (staged / "opt/albumfs/bin/albumfs").is_file()
    assert "ExecStart=/opt/albumfs/bin/albumfs mount -f %f" in \
        (staged / "opt/albumfs/lib/systemd/user/albumfs@.service").read_text()
    completion = run(["bash", "-c", f"source {installed}/share/bash-completion/completions/albumfs; complete -p albumfs"],
                     text=True).stdout
    assert "_albumfs" in completion


def test_ready_only_once_the_mount_answers_and_sigterm_unmounts(installed, tmp_path):
    """NOTIFY_SOCKET as systemd sets it for Type=notify: READY=1 arrives once the mount is in the
    table and answers; SIGTERM unmounts, releases the store and exits 0."""
    binary = installed / "bin" / "albumfs"
    store, mp = tmp_path / "store", tmp_path / "mnt"
    mp.mkdir()
    run([binary, "init", store])
    notify = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(os.fspath(notify))
    sock.settimeout(30)
    proc = subprocess.Popen([binary, "mount", "-f", "--store", store, mp], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "NOTIFY_SOCKET": os.fspath(notify)})
    try:
        message = sock.recv(4096).decode()
        assert "READY=1" in message, message
        assert is_mounted(mp), "READY=1 came before the mount was in the mount table"
        assert sorted(os.listdir(mp)) == ["Albums", "By Date", "Camera Roll", "Hidden", "Recently Deleted", "Smart Albums"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, proc.stderr.read().decode()
        assert not is_mounted(mp), "SIGTERM left the mount behind"
        assert "mounted: no" in run([binary, "stats", "--store", store], text=True).stdout
        assert "STOPPING=1" in sock.recv(4096).decode()
    finally:
        sock.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        if is_mounted(mp):
            run(["fusermount3", "-uz", mp], check=False)
