"""A real S3 server on loopback for tests: a one-node Ceph RADOS Gateway (scripts/lib/radosgw).

    from objectstore import object_store  # noqa: F401  (the pytest fixture)

    def test_something(object_store):
        object_store.endpoint      # "http://127.0.0.1:PORT" (path-style; no DNS buckets)
        object_store.access_key    # the S3 user's access key id
        object_store.secret_key    # ... and secret
        object_store.region        # "us-east-1", the SigV4 scope region to sign with
        object_store.s3cmd("mb", "s3://bucket")   # an independent client, already configured

or, outside pytest, `with running_object_store() as store: ...`. From a shell (e.g. for the Swift
LiveS3Tests, which read RADOSGW_ENDPOINT, RADOSGW_ACCESS_KEY, RADOSGW_SECRET_KEY, RADOSGW_REGION):

    eval "$(scripts/lib/radosgw start "$dir")"; ...; scripts/lib/radosgw stop "$dir"

Each use starts its own cluster (mon + memstore OSD + radosgw, ~2-3 s, ~130 MB RSS) in a fresh
short temp dir (/tmp/rgw-XXXX: the daemons' admin sockets must fit a UNIX socket path), on ports
picked at run time, and always stops it (by pid files, waiting for the daemons to exit) and removes
the dir, also when the test fails. Every wait has a timeout. A failed start raises
ObjectStoreError with the daemons' log tails; a failed test gets the tails in its teardown output.
Objects live in RAM: nothing survives a stop.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
RADOSGW = REPO / "scripts" / "lib" / "radosgw"
# the script's own bound for the whole start (it is ~3 s; a loaded 2-core machine may take more)
START_TIMEOUT = int(os.environ.get("ALBUMFS_RADOSGW_START_TIMEOUT", "90"))
STOP_TIMEOUT = 90        # the script waits 30 s after SIGTERM and 10 s after SIGKILL
S3CMD_TIMEOUT = 60
MARKER = ".albumfs-radosgw"   # the script's mark on a state dir it made (and stop may remove)


class ObjectStoreError(RuntimeError):
    pass


@dataclass
class ObjectStore:
    endpoint: str
    host: str
    port: int
    access_key: str
    secret_key: str
    region: str
    s3cfg: Path           # s3cmd configuration for this store (path-style, SigV4)
    mon_port: int
    state_dir: Path
    start_seconds: float
    pids: dict[str, int] = field(default_factory=dict)   # daemon name -> pid
    stop_report: str | None = None   # what `radosgw stop` said on stderr (after the stop)

    def s3cmd(self, *args: str, check: bool = True, timeout: float = S3CMD_TIMEOUT,
              **options: str) -> subprocess.CompletedProcess:
        """Run `s3cmd -c S3CFG [--key=value for options] ARGS`; check: fail on a non-zero exit."""
        command = ["s3cmd", "-c", str(self.s3cfg),
                   *(f"--{k}={v}" for k, v in options.items()), *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                stdin=subprocess.DEVNULL)
        if check and result.returncode != 0:
            raise ObjectStoreError(f"{' '.join(command)} exited {result.returncode}\n"
                                   f"stdout: {result.stdout}\nstderr: {result.stderr}")
        return result

    def log_tails(self, lines: int = 40) -> str:
        out = []
        for log in sorted((self.state_dir / "log").glob("*")):
            try:
                text = log.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            out.append(f"----- {log} (last {lines} lines)\n" + "\n".join(text))
        return "\n".join(out)


def _stop(state_dir: Path) -> str:
    """`radosgw stop`: raises if a daemon outlived SIGKILL; returns what it reported (a daemon
    that needed SIGKILL, a process no pid file named), which is printed."""
    result = subprocess.run([str(RADOSGW), "stop", str(state_dir)], capture_output=True, text=True,
                            timeout=STOP_TIMEOUT, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise ObjectStoreError(f"radosgw stop {state_dir} exited {result.returncode}: "
                               f"{result.stderr.strip()}")
    if result.stderr.strip():
        print(result.stderr.strip())
    return result.stderr


def _start(state_dir: Path) -> ObjectStore:
    # Own session: on a timeout the script and its CLI calls are killed as a group (the daemons
    # have sessions of their own and are stopped by their pid files).
    process = subprocess.Popen([str(RADOSGW), "start", str(state_dir), "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               stdin=subprocess.DEVNULL, start_new_session=True,
                               env={**os.environ, "ALBUMFS_RADOSGW_START_TIMEOUT": str(START_TIMEOUT)})
    try:
        stdout, stderr = process.communicate(timeout=START_TIMEOUT + 30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate(timeout=30)
        raise ObjectStoreError(f"radosgw start {state_dir} did not return in {START_TIMEOUT + 30} s:\n"
                               f"{stderr}")
    if process.returncode != 0:
        raise ObjectStoreError(f"radosgw start {state_dir} exited {process.returncode}:\n{stderr}")
    info = json.loads(stdout)
    pids = {}
    for pid_file in (state_dir / "pids").glob("*.pid"):
        pids[pid_file.name[:-len(".pid")]] = int(pid_file.read_text().strip())
    return ObjectStore(endpoint=info["endpoint"], host=info["host"], port=int(info["port"]),
                       access_key=info["access_key"], secret_key=info["secret_key"],
                       region=info["region"], s3cfg=Path(info["s3cfg"]),
                       mon_port=int(info["mon_port"]), state_dir=state_dir,
                       start_seconds=float(info["start_seconds"]), pids=pids)


@contextlib.contextmanager
def running_object_store(base: str | os.PathLike | None = None) -> Iterator[ObjectStore]:
    """Start a store in a new temp dir (under base, default /tmp), yield it, always stop it."""
    state_dir = Path(tempfile.mkdtemp(prefix="rgw-", dir=base))
    try:
        store = _start(state_dir)
    except BaseException as error:
        if (state_dir / MARKER).exists():
            try:
                _stop(state_dir)   # what a failed start left: its logs (already in the error)
            except Exception as stop_error:
                error.add_note(f"and stopping the object store failed too: {stop_error}")
        else:
            with contextlib.suppress(OSError):
                state_dir.rmdir()   # the script refused before it made the dir its own
        raise
    failure = None
    try:
        yield store
    except BaseException as error:
        failure = error
        raise
    finally:
        try:
            store.stop_report = _stop(state_dir)
        except Exception as stop_error:
            if failure is None:
                raise
            failure.add_note(f"and stopping the object store failed too: {stop_error}")


@pytest.fixture
def object_store(request) -> Iterator[ObjectStore]:
    """A fresh S3 server for one test (see the module's doc); stopped and removed afterwards."""
    with running_object_store() as store:
        yield store
        report = getattr(request.node, "rep_call", None)   # set by conftest's makereport hook
        if report is not None and report.failed:
            print(f"object store {store.endpoint}, state {store.state_dir}:\n{store.log_tails()}")
