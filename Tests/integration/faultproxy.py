"""A fault-injecting HTTP/1.1 proxy for tests, between an S3 client (albumfs, s3cmd) and a real S3
server on loopback (objectstore.py's radosgw). Standard library only.

    from faultproxy import FaultProxy

    with FaultProxy(store.host, store.port) as proxy:
        proxy.endpoint                       # "http://127.0.0.1:PORT": give the client this one
        proxy.respond("PUT", status=503, code="SlowDown", times=2)
        proxy.reset_mid_response("GET", after_bytes=65536, path_contains="/originals/")
        proxy.stall("GET", before="headers"); ...; proxy.wait_until(lambda: proxy.stalled == 1)
        proxy.release()
        proxy.offline(); ...; proxy.online()
        proxy.requests                       # [(method, path, status), ...] in order of arrival
        proxy.count("PUT", path_contains="/photos/")

How it forwards: one thread per client connection, and one upstream connection per client
connection (opened at its first request), so HTTP/1.1 keep-alive works as it does without the
proxy: when the upstream closes an idle connection, the proxy closes the client's. It parses just
enough framing to know where a request and a response end (request line, headers, a
Content-Length or chunked body; responses to HEAD, 1xx, 204 and 304 have no body; a response with
neither length nor chunking runs to the upstream's close) and forwards every byte unchanged, the
Host header included: SigV4 signs Host, and radosgw checks the signature against the Host as sent,
whatever port it names. `Expect: 100-continue` is forwarded, and the upstream's interim 100 is
relayed to the client.

Faults: each call adds a rule that applies to the next `times` requests whose method matches
(None matches any method) and, if given, whose request target (path and query) contains
path_contains. Rules are matched in the order they were added, each request takes at most one,
and which one is decided when the request's head arrives. They can be added from any thread at
any time. Connections broken by a fault are reset (RST, SO_LINGER 0), both the client's and the
upstream's, never closed politely.

`requests` records every request in order of arrival as (method, path, status): status is the
status the client was sent (the upstream's, or an injected one), None while the request is in
flight, "fault" when an injected fault (a reset, offline, close) broke it, "error" when the
connection broke without one (the client or the upstream went away, a malformed message).
"""

from __future__ import annotations

import fcntl
import html
import http
import select
import socket
import struct
import termios
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

HEAD_LIMIT = 64 * 1024        # a request or response head longer than this is malformed
PIECE = 64 * 1024             # bytes read and forwarded at a time
CONNECT_TIMEOUT = 10.0        # to open an upstream connection
FLUSH_TIMEOUT = 1.0           # how long a reset mid response waits for the client to take the bytes
JOIN_TIMEOUT = 10.0           # close(): for all of the proxy's threads together
_RST_LINGER = struct.pack("ii", 1, 0)


class Request(NamedTuple):
    method: str
    path: str
    status: int | str | None


@dataclass
class _Fault:
    kind: str                  # reset_mid_request, reset_mid_response, respond, stall
    method: str | None
    path_contains: str | None
    remaining: int
    after_bytes: int = 0
    status: int = 503
    code: str = "SlowDown"
    message: str = ""
    before: str = "headers"
    seconds: float | None = None

    def matches(self, method: str, path: str) -> bool:
        return (self.remaining > 0 and (self.method is None or self.method == method)
                and (self.path_contains is None or self.path_contains in path))


class _Record:
    __slots__ = ("method", "path", "status")

    def __init__(self, method: str, path: str):
        self.method, self.path, self.status = method, path, None


class _Killed(Exception):
    """The proxy reset this connection (offline, close)."""


class _Closed(Exception):
    """The peer closed its side where more bytes were due."""


class _Malformed(Exception):
    pass


class _InjectedReset(Exception):
    """A reset_mid_request / reset_mid_response fault fired."""


class _Side:
    """One socket of a session (the client's or the upstream's): non-blocking, with a read buffer;
    every wait also watches the session's wake-up socket, so a kill interrupts it."""

    def __init__(self, sock: socket.socket, session: "_Session"):
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        self.sock, self.session, self.buf = sock, session, bytearray()

    def _recv_into_buf(self) -> bool:
        """Wait for bytes and append them; False at EOF."""
        while True:
            self.session.wait(read=[self.sock])
            try:
                data = self.sock.recv(PIECE)
            except (BlockingIOError, InterruptedError):
                continue
            if not data:
                return False
            self.buf += data
            return True

    def read_head(self) -> bytes | None:
        """A request or response head (up to and including the empty line); None at a clean EOF
        before its first byte."""
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end >= 0:
                head = bytes(self.buf[:end + 4])
                del self.buf[:end + 4]
                return head
            if len(self.buf) > HEAD_LIMIT:
                raise _Malformed("head too long")
            if not self._recv_into_buf():
                if not self.buf:
                    return None
                raise _Closed("EOF inside a head")

    def readline(self) -> bytes:
        while True:
            end = self.buf.find(b"\r\n")
            if end >= 0:
                line = bytes(self.buf[:end + 2])
                del self.buf[:end + 2]
                return line
            if len(self.buf) > HEAD_LIMIT:
                raise _Malformed("line too long")
            if not self._recv_into_buf():
                raise _Closed("EOF inside a chunked body")

    def read_some(self, n: int, also: "_Side | None" = None, eof_ok: bool = False) -> bytes | None:
        """Up to n bytes; None if `also` had bytes (or EOF) to read first; b"" at EOF if eof_ok."""
        while True:
            if self.buf:
                data = bytes(self.buf[:n])
                del self.buf[:n]
                return data
            if also is not None and also.buf:
                return None
            readable = self.session.wait(read=[self.sock] + ([also.sock] if also else []))
            if self.sock not in readable:
                return None
            try:
                data = self.sock.recv(n)
            except (BlockingIOError, InterruptedError):
                continue
            if not data:
                if eof_ok:
                    return b""
                raise _Closed("EOF inside a body")
            return data

    def send_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                sent = self.sock.send(view)
            except (BlockingIOError, InterruptedError):
                self.session.wait(write=[self.sock])
                continue
            view = view[sent:]

    def flush(self, timeout: float) -> None:
        """Wait (boundedly) until the peer has acknowledged every byte sent."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                unacked = struct.unpack("i", fcntl.ioctl(self.sock, termios.TIOCOUTQ, b"\0" * 4))[0]
            except OSError:
                return
            if unacked == 0:
                return
            self.session.wait(timeout=0.002)

    def reset(self) -> None:
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RST_LINGER)
        except OSError:
            pass
        self.sock.close()

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class _Message:
    """A parsed request or response head."""

    def __init__(self, raw: bytes, is_request: bool):
        self.raw = raw
        lines = raw[:-4].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or (is_request and len(parts) != 3):
            raise _Malformed(f"bad start line {lines[0]!r}")
        self.headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise _Malformed(f"bad header line {line!r}")
            name = name.strip().lower()
            value = value.strip()
            self.headers[name] = f"{self.headers[name]}, {value}" if name in self.headers else value
        if is_request:
            self.method, self.target, self.version = parts
        else:
            self.version = parts[0]
            try:
                self.status = int(parts[1])
            except ValueError:
                raise _Malformed(f"bad status line {lines[0]!r}") from None

    def tokens(self, name: str) -> set[str]:
        return {t.strip().lower() for t in self.headers.get(name, "").split(",") if t.strip()}

    @property
    def chunked(self) -> bool:
        return "chunked" in self.tokens("transfer-encoding")

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("content-length")
        if value is None:
            return None
        try:
            length = int(value.split(",")[0])
        except ValueError:
            raise _Malformed(f"bad Content-Length {value!r}") from None
        if length < 0:
            raise _Malformed(f"bad Content-Length {value!r}")
        return length

    @property
    def keep_alive(self) -> bool:
        connection = self.tokens("connection")
        if self.version == "HTTP/1.0":
            return "keep-alive" in connection
        return "close" not in connection


class _Session(threading.Thread):
    """One client connection and its upstream connection."""

    def __init__(self, proxy: "FaultProxy", client: socket.socket, number: int):
        super().__init__(name=f"faultproxy-{proxy.port}-conn{number}", daemon=True)
        self.proxy = proxy
        self.killed = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self.client = _Side(client, self)
        self.upstream: _Side | None = None
        self.record: _Record | None = None

    # --- waiting -------------------------------------------------------------------------

    def kill(self) -> None:
        """Reset this connection from another thread (offline, close)."""
        self.killed = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        with self.proxy._cond:
            self.proxy._cond.notify_all()

    def wait(self, read: list | tuple = (), write: list | tuple = (), timeout: float | None = None) -> set:
        """Sockets ready to read (read ones only); raises _Killed once kill() was called."""
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        for s in read:
            poller.register(s, select.POLLIN)
        for s in write:
            poller.register(s, select.POLLOUT)
        while True:
            if self.killed:
                raise _Killed()
            events = poller.poll(None if timeout is None else timeout * 1000)
            if self.killed:
                raise _Killed()
            if events or timeout is not None:
                fds = {fd for fd, _ in events}
                return {s for s in read if s.fileno() in fds}

    # --- the connection ------------------------------------------------------------------

    def run(self) -> None:
        how = "close"
        try:
            how = self._serve()
        except _Killed:
            how = "reset"
            self._finish_record("fault")
        except _InjectedReset:
            how = "reset"
            self._finish_record("fault")
        except (_Closed, _Malformed, OSError):
            how = "reset"
            self._finish_record("error")
        except BaseException:
            how = "reset"
            self._finish_record("error")
            raise
        finally:
            for side in (self.client, self.upstream):
                if side is not None:
                    side.reset() if how == "reset" else side.close()
            self._wake_r.close()
            self._wake_w.close()
            self.proxy._session_ended(self)

    def _finish_record(self, status: int | str) -> None:
        """Set the status of the request in flight: just before its last byte goes to the client
        (so that a client holding the whole response finds it recorded), or when it broke."""
        if self.record is not None:
            self.proxy._set_status(self.record, status)

    def _serve(self) -> str:
        while True:
            # Idle: the next request, or the upstream closing its side (then close ours too).
            if not self.client.buf:
                watch = [self.client.sock] + ([self.upstream.sock] if self.upstream else [])
                readable = self.wait(read=watch)
                if self.upstream is not None and self.upstream.sock in readable:
                    return "close"
            raw = self.client.read_head()
            if raw is None:
                return "close"
            request = _Message(raw, is_request=True)
            self.record, fault = self.proxy._begin(request.method, request.target)
            keep = self._exchange(request, fault)
            self.record = None
            if not keep:
                return "close"

    def _exchange(self, request: _Message, fault: _Fault | None) -> bool:
        """One request and its response; whether the connection may carry another."""
        kind = fault.kind if fault else None
        if kind == "respond":
            return self._respond(request, fault)
        if self.upstream is None:
            try:
                upstream = socket.create_connection(self.proxy._upstream, timeout=CONNECT_TIMEOUT)
            except OSError as error:
                self._discard_body(request)
                self._send_error(request, 502, "BadGateway", f"faultproxy: upstream: {error}")
                return False
            self.upstream = _Side(upstream, self)
        self.upstream.send_all(request.raw)
        early = self._forward_request_body(request, fault if kind == "reset_mid_request" else None)
        response = early if early is not None else self._read_response_head()
        if kind == "stall" and fault.before == "headers":
            self.proxy._stall(self, fault)
        if request.method == "HEAD" or response.status in (204, 304):
            self._finish_record(response.status)   # the head is all there is
        self.client.send_all(response.raw)
        if kind == "stall" and fault.before == "body":
            self.proxy._stall(self, fault)
        keep = self._forward_response_body(request, response,
                                           fault if kind == "reset_mid_response" else None)
        return keep and early is None and request.keep_alive and response.keep_alive

    # --- requests ------------------------------------------------------------------------

    def _body_pieces(self, source: _Side, message: _Message, also: _Side | None = None,
                     to_eof: bool = False) -> Iterator[bytes | None]:
        """The body's bytes as on the wire (chunk framing included), in pieces; None whenever
        `also` has something to read first."""
        def exactly(n: int) -> Iterator[bytes | None]:
            while n:
                piece = source.read_some(min(n, PIECE), also)
                if piece is not None:
                    n -= len(piece)
                yield piece

        if message.chunked:
            while True:
                line = source.readline()
                yield line
                try:
                    size = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise _Malformed(f"bad chunk size line {line!r}") from None
                if size == 0:
                    while True:
                        trailer = source.readline()
                        yield trailer
                        if trailer == b"\r\n":
                            return
                yield from exactly(size + 2)
        elif message.content_length is not None:
            yield from exactly(message.content_length)
        elif to_eof:
            while piece := source.read_some(PIECE, also, eof_ok=True):
                yield piece

    def _discard_body(self, request: _Message) -> None:
        if "100-continue" in request.tokens("expect") and (request.chunked or request.content_length):
            self.client.send_all(b"HTTP/1.1 100 Continue\r\n\r\n")
        for _ in self._body_pieces(self.client, request):
            pass

    def _forward_request_body(self, request: _Message, reset: _Fault | None) -> _Message | None:
        """Pump the body upstream; relay interim responses; returns a final response the upstream
        sent before the body was all sent (then the connection is not reused)."""
        sent = 0
        for piece in self._body_pieces(self.client, request, also=self.upstream):
            if piece is None:
                response = _Message(self._upstream_head(), is_request=False)
                if 100 <= response.status < 200 and response.status != 101:
                    self.client.send_all(response.raw)
                    continue
                return response
            if reset is not None and sent + len(piece) >= reset.after_bytes:
                self.upstream.send_all(piece[:reset.after_bytes - sent])
                raise _InjectedReset()
            self.upstream.send_all(piece)
            sent += len(piece)
        if reset is not None:
            raise _InjectedReset()   # the body was shorter than after_bytes
        return None

    def _upstream_head(self) -> bytes:
        raw = self.upstream.read_head()
        if raw is None:
            raise _Closed("the upstream closed before it answered")
        return raw

    def _read_response_head(self) -> _Message:
        while True:
            response = _Message(self._upstream_head(), is_request=False)
            if 100 <= response.status < 200 and response.status != 101:
                self.client.send_all(response.raw)
                continue
            return response

    def _forward_response_body(self, request: _Message, response: _Message,
                               reset: _Fault | None) -> bool:
        if request.method == "HEAD" or response.status in (204, 304):
            pieces: Iterator[bytes | None] = iter(())
            keep = True
        else:
            to_eof = not response.chunked and response.content_length is None
            pieces = self._body_pieces(self.upstream, response, to_eof=to_eof)
            keep = not to_eof
        sent = 0
        last = b""   # held back until the status is recorded
        for piece in pieces:
            if reset is not None and sent + len(piece) >= reset.after_bytes:
                self.client.send_all(last + piece[:reset.after_bytes - sent])
                self.client.flush(FLUSH_TIMEOUT)
                raise _InjectedReset()
            self.client.send_all(last)
            last = piece
            sent += len(piece)
        if reset is not None:
            self.client.send_all(last)
            self.client.flush(FLUSH_TIMEOUT)
            raise _InjectedReset()   # the body was not longer than after_bytes
        self._finish_record(response.status)
        self.client.send_all(last)
        return keep

    # --- answers of the proxy's own ------------------------------------------------------

    def _respond(self, request: _Message, fault: _Fault) -> bool:
        self._discard_body(request)
        self._send_error(request, fault.status, fault.code, fault.message)
        return request.keep_alive

    def _send_error(self, request: _Message, status: int, code: str, message: str) -> None:
        with self.proxy._cond:
            self.proxy._error_number += 1
            request_id = f"faultproxy-{self.proxy._error_number}"
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{html.escape(code)}</Code>'
                f"<Message>{html.escape(message)}</Message>"
                f"<Resource>{html.escape(request.target)}</Resource>"
                f"<RequestId>{request_id}</RequestId></Error>").encode()
        try:
            reason = http.HTTPStatus(status).phrase
        except ValueError:
            reason = "Error"
        self._finish_record(status)
        head_only = request.method == "HEAD"
        head = (f"HTTP/1.1 {status} {reason}\r\n"
                f"Content-Type: application/xml\r\n"
                f"Content-Length: {0 if head_only else len(body)}\r\n"
                f"x-amz-request-id: {request_id}\r\n"
                f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S GMT', time.gmtime())}\r\n"
                f"Connection: {'keep-alive' if request.keep_alive else 'close'}\r\n\r\n").encode()
        self.client.send_all(head if head_only else head + body)


class FaultProxy:
    """Listens on 127.0.0.1:<free port> (see the module's doc). A context manager; close() (also
    on the context's exit) resets every connection and joins every thread."""

    def __init__(self, upstream_host: str, upstream_port: int, host: str = "127.0.0.1"):
        self._upstream = (upstream_host, int(upstream_port))
        self._cond = threading.Condition()
        self._faults: list[_Fault] = []
        self._records: list[_Record] = []
        self._sessions: set[_Session] = set()
        self._threads: list[threading.Thread] = []
        self._offline = False
        self._closed = False
        self._stalled = 0
        self._release_generation = 0
        self._connections = 0
        self._refused = 0
        self._applied: list[tuple[str, str, str]] = []
        self._error_number = 0
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind((host, 0))
        self._listener.listen(64)
        self.host, self.port = self._listener.getsockname()[:2]
        self._wake_r, self._wake_w = socket.socketpair()
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True,
                                          name=f"faultproxy-{self.port}-accept")
        self._acceptor.start()

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close(raise_on_leftover=exc[0] is None)

    def __repr__(self) -> str:
        return f"FaultProxy({self.endpoint} -> {self._upstream[0]}:{self._upstream[1]})"

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def upstream(self) -> tuple[str, int]:
        return self._upstream

    # --- faults --------------------------------------------------------------------------

    def _add(self, fault: _Fault) -> None:
        if fault.remaining < 1:
            raise ValueError("times must be at least 1")
        with self._cond:
            self._faults.append(fault)

    def reset_mid_request(self, method: str | None, after_bytes: int = 0,
                          path_contains: str | None = None, times: int = 1) -> None:
        """Forward the request head and the first after_bytes bytes of its body upstream, then
        reset both connections (the client sees ECONNRESET / EPIPE while sending; the upstream
        sees a truncated body). A body no longer than after_bytes is forwarded whole and the reset
        comes before the response: the upstream may then have done the request."""
        self._add(_Fault("reset_mid_request", method, path_contains, times, after_bytes=after_bytes))

    def reset_mid_response(self, method: str | None, after_bytes: int = 0,
                           path_contains: str | None = None, times: int = 1) -> None:
        """Forward the request and the response head and the first after_bytes bytes of the
        response body (as on the wire: a chunked body's framing counts), wait up to 1 s for the
        client to acknowledge them, then reset both connections. A body no longer than after_bytes
        is forwarded whole, then reset."""
        self._add(_Fault("reset_mid_response", method, path_contains, times, after_bytes=after_bytes))

    def respond(self, method: str | None, status: int = 503, code: str = "SlowDown",
                message: str | None = None, path_contains: str | None = None,
                times: int = 1) -> None:
        """Answer the request itself, without contacting the upstream, after reading (and
        dropping) its body (sending `100 Continue` first when the client asked for it): status,
        and an S3 XML error body <Error><Code>code</Code><Message>message</Message>... with
        Content-Length (none for HEAD). The connection stays usable."""
        self._add(_Fault("respond", method, path_contains, times, status=status, code=code,
                         message=message if message is not None
                         else f"faultproxy: injected {status} {code}"))

    def stall(self, method: str | None, before: str = "headers", seconds: float | None = None,
              path_contains: str | None = None, times: int = 1) -> None:
        """Forward the request, then hold the response: before="headers" sends the client nothing
        of it, before="body" sends the head and holds the body; until release() or, if given,
        seconds have passed (then it goes on normally). `stalled` counts the ones held now."""
        if before not in ("headers", "body"):
            raise ValueError('before must be "headers" or "body"')
        self._add(_Fault("stall", method, path_contains, times, before=before, seconds=seconds))

    def release(self) -> None:
        """Let every response stalled now go on (a stall that starts later waits again)."""
        with self._cond:
            self._release_generation += 1
            self._cond.notify_all()

    def clear_faults(self) -> None:
        """Forget every rule not used up yet (held stalls stay held: release() them)."""
        with self._cond:
            self._faults.clear()

    @property
    def pending_faults(self) -> list[tuple[str, str | None, str | None, int]]:
        """Rules not used up yet: (kind, method, path_contains, remaining)."""
        with self._cond:
            return [(f.kind, f.method, f.path_contains, f.remaining) for f in self._faults if f.remaining]

    @property
    def applied_faults(self) -> list[tuple[str, str, str]]:
        """(kind, method, path) of every fault applied so far, in order."""
        with self._cond:
            return list(self._applied)

    def offline(self) -> None:
        """Reset every open connection; from now on reset every new one as soon as it is
        accepted (connect() succeeds, the first read or write fails with ECONNRESET)."""
        with self._cond:
            self._offline = True
            sessions = list(self._sessions)
        for session in sessions:
            session.kill()

    def online(self) -> None:
        with self._cond:
            self._offline = False

    # --- what happened -------------------------------------------------------------------

    @property
    def requests(self) -> list[Request]:
        with self._cond:
            return [Request(r.method, r.path, r.status) for r in self._records]

    def count(self, method: str | None = None, path_contains: str | None = None) -> int:
        """Requests that reached the proxy (answered or not) with that method (None: any) and
        path substring."""
        with self._cond:
            return sum(1 for r in self._records if (method is None or r.method == method)
                       and (path_contains is None or path_contains in r.path))

    @property
    def connections(self) -> int:
        """Client connections accepted while online."""
        with self._cond:
            return self._connections

    @property
    def refused(self) -> int:
        """Client connections reset on accept while offline."""
        with self._cond:
            return self._refused

    @property
    def stalled(self) -> int:
        with self._cond:
            return self._stalled

    @property
    def open_connections(self) -> int:
        with self._cond:
            return len(self._sessions)

    def wait_until(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        """Wait until predicate() (re-checked whenever the proxy's state changes) is true;
        TimeoutError after timeout seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{self}: condition not met in {timeout} s; "
                                       f"requests: {self.requests}")
                self._cond.wait(left)

    # --- internals -----------------------------------------------------------------------

    def _begin(self, method: str, path: str) -> tuple[_Record, _Fault | None]:
        with self._cond:
            record = _Record(method, path)
            self._records.append(record)
            fault = next((f for f in self._faults if f.matches(method, path)), None)
            if fault is not None:
                fault.remaining -= 1
                self._applied.append((fault.kind, method, path))
                self._faults = [f for f in self._faults if f.remaining]
            self._cond.notify_all()
            return record, fault

    def _set_status(self, record: _Record, status: int | str) -> None:
        with self._cond:
            record.status = status
            self._cond.notify_all()

    def _stall(self, session: _Session, fault: _Fault) -> None:
        deadline = None if fault.seconds is None else time.monotonic() + fault.seconds
        with self._cond:
            self._stalled += 1
            self._cond.notify_all()
            generation = self._release_generation
            try:
                while not session.killed and generation == self._release_generation:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        break
                    self._cond.wait(left)
            finally:
                self._stalled -= 1
                self._cond.notify_all()
        if session.killed:
            raise _Killed()

    def _session_ended(self, session: _Session) -> None:
        with self._cond:
            self._sessions.discard(session)
            self._cond.notify_all()

    def _accept_loop(self) -> None:
        poller = select.poll()
        poller.register(self._listener, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        try:
            while not self._closed:
                if not poller.poll():
                    continue
                if self._closed:
                    break
                try:
                    client, _ = self._listener.accept()
                except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                    continue
                with self._cond:
                    if self._offline or self._closed:
                        self._refused += 1
                        session = None
                    else:
                        self._connections += 1
                        session = _Session(self, client, self._connections)
                        self._sessions.add(session)
                        self._threads = [t for t in self._threads if t.is_alive()]
                        self._threads.append(session)
                    self._cond.notify_all()
                if session is None:
                    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RST_LINGER)
                    client.close()
                else:
                    session.start()
        finally:
            self._listener.close()

    def close(self, raise_on_leftover: bool = True) -> None:
        """Stop listening, reset every connection, release every stall, join every thread
        (RuntimeError if one outlives JOIN_TIMEOUT, unless raise_on_leftover is false)."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            sessions = list(self._sessions)
            self._cond.notify_all()
        self._wake_w.send(b"x")
        for session in sessions:
            session.kill()
        deadline = time.monotonic() + JOIN_TIMEOUT
        self._acceptor.join(max(0.0, deadline - time.monotonic()))
        with self._cond:
            threads = list(self._threads)
        for thread in threads:
            if thread.ident is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
        self._wake_r.close()
        self._wake_w.close()
        leftover = [t.name for t in [self._acceptor, *threads] if t.is_alive()]
        if leftover and raise_on_leftover:
            raise RuntimeError(f"{self}: threads still running {JOIN_TIMEOUT} s after close: {leftover}")


def s3cfg_via(source: str | Path, destination: str | Path, endpoint: str) -> Path:
    """Write a copy of s3cmd configuration `source` whose host_base and host_bucket name the
    endpoint ("http://HOST:PORT" or "HOST:PORT"), e.g. a FaultProxy's. Returns destination."""
    host_port = endpoint.split("://", 1)[-1].rstrip("/")
    lines = []
    for line in Path(source).read_text().splitlines():
        key = line.split("=", 1)[0].strip()
        lines.append(f"{key} = {host_port}" if key in ("host_base", "host_bucket") else line)
    Path(destination).write_text("\n".join(lines) + "\n")
    return Path(destination)
