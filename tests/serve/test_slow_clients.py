"""Slow clients (slowloris) against a real ``dal serve`` process: connections that send their request head or body
a byte at a time are answered 408 and closed after ``--header-timeout`` / ``--body-timeout`` seconds, and meanwhile
a normal client is answered promptly; ``--max-connections`` bounds what they can hold (503 beyond it)."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator

import pytest

from dal.catalog import Catalog
from tests.serve.conftest import http, start, stop

TIMEOUT_S = 1.5
MAX_CONNECTIONS = 40
HEAD = b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Filler: " + b"a" * 40 + b"\r\n\r\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = f"sqlite:///{tmp_path_factory.mktemp('slow')}/catalog.db"
    Catalog(db).close()
    limits = ["--header-timeout", str(TIMEOUT_S), "--body-timeout", str(TIMEOUT_S),
              "--max-connections", str(MAX_CONNECTIONS)]  # fmt: skip
    proc, url = start(db, limits)
    try:
        yield url
    finally:
        stop(proc)


def _connect(url: str) -> socket.socket:
    parsed = urllib.parse.urlsplit(url)
    return socket.create_connection((parsed.hostname, parsed.port), timeout=10)


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (10 s at most)."""
    out = b""
    sock.settimeout(10)
    while True:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            return out
        if not chunk:
            return out
        out += chunk


def _trickle(sock: socket.socket, data: bytes, every: float, stop_at: threading.Event) -> None:
    for i in range(len(data)):
        if stop_at.is_set():
            return
        try:
            sock.sendall(data[i : i + 1])
        except OSError:  # closed by the server: what it should do
            return
        time.sleep(every)


def _timed_health(url: str) -> float:
    started = time.monotonic()
    status, raw, _ = http("GET", url + "/api/v1/health")
    assert status == 200 and json.loads(raw)["ok"] is True
    return time.monotonic() - started


def test_slow_heads_do_not_hold_the_server_and_are_cut_off_with_408(server: str) -> None:
    stop_at = threading.Event()
    socks = [_connect(server) for _ in range(MAX_CONNECTIONS // 2)]
    opened = time.monotonic()
    threads = [threading.Thread(target=_trickle, args=(s, HEAD, 0.2, stop_at), daemon=True) for s in socks]
    for t in threads:
        t.start()
    try:
        # while they trickle, a normal client is answered promptly, again and again
        times = [_timed_health(server) for _ in range(10)]
        assert max(times) < 1.0, times
        answers = [_answer(s) for s in socks]
        cut = time.monotonic() - opened
    finally:
        stop_at.set()
        for s in socks:
            s.close()
    # each was answered 408 (JSON, as every error) and closed, though it kept sending: the head's time is bounded
    for raw in answers:
        assert raw.startswith(b"HTTP/1.1 408 "), raw[:80]
        assert json.loads(raw.split(b"\r\n\r\n", 1)[1])["error"] == "the request head was not received within 1.5 s"
    assert TIMEOUT_S <= cut < TIMEOUT_S + 5  # the head would have taken 0.2 s x 60 bytes = 12 s
    assert _timed_health(server) < 1.0


def test_the_next_request_head_on_a_kept_alive_connection_is_bounded_too(server: str) -> None:
    with _connect(server) as sock:
        sock.sendall(HEAD)
        first = b""
        while not first.endswith(b'{"ok":true,"api":"v1"}'):  # the whole first answer (head and body)
            chunk = sock.recv(65536)
            assert chunk, first
            first += chunk
        assert first.startswith(b"HTTP/1.1 200 ")
        stop_at = threading.Event()
        threading.Thread(target=_trickle, args=(sock, HEAD, 0.2, stop_at), daemon=True).start()
        started = time.monotonic()
        raw = _answer(sock)
        stop_at.set()
    assert raw.startswith(b"HTTP/1.1 408 ") and TIMEOUT_S - 0.2 <= time.monotonic() - started < TIMEOUT_S + 5


def test_a_slow_body_is_cut_off_with_408(server: str) -> None:
    head = (b"POST /api/v1/admin/principals HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n")  # fmt: skip
    stop_at = threading.Event()
    with _connect(server) as sock:
        sock.sendall(head)
        started = time.monotonic()
        threading.Thread(target=_trickle, args=(sock, b"{" + b" " * 99, 0.2, stop_at), daemon=True).start()
        assert _timed_health(server) < 1.0  # meanwhile
        raw = _answer(sock)  # then the connection is closed
        took = time.monotonic() - started
        stop_at.set()
    assert raw.startswith(b"HTTP/1.1 408 "), raw[:80]
    assert b"connection: close" in raw.lower()
    assert json.loads(raw.split(b"\r\n\r\n", 1)[1]) == {
        "error": "the request body was not received within 1.5 s",
        "type": "DalError",
    }
    assert TIMEOUT_S <= took < TIMEOUT_S + 5  # the body would have taken 20 s


def test_connections_beyond_the_limit_are_refused_until_the_slow_ones_are_cut_off(server: str) -> None:
    idle = [_connect(server) for _ in range(MAX_CONNECTIONS)]  # connected, sending nothing
    try:
        time.sleep(0.3)
        status, _raw, _ = http("GET", server + "/api/v1/health")
        assert status == 503  # a clear answer, not a hang
        time.sleep(TIMEOUT_S + 1.0)  # their heads' deadline passes: each is answered 408 and closed
        assert _timed_health(server) < 1.0
        assert all(_answer(s).startswith(b"HTTP/1.1 408 ") for s in idle)
    finally:
        for s in idle:
            s.close()


def test_an_unread_body_trickled_after_the_answer_does_not_keep_the_connection(server: str) -> None:
    """A GET's body is never read: uvicorn would keep the connection while its bytes trickle; it is closed once the
    body's deadline passes."""
    stop_at = threading.Event()
    with _connect(server) as sock:
        sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n")
        started = time.monotonic()
        threading.Thread(target=_trickle, args=(sock, b"x" * 100, 0.2, stop_at), daemon=True).start()
        raw = _answer(sock)
        took = time.monotonic() - started
        stop_at.set()
    assert raw.startswith(b"HTTP/1.1 200 ") and raw.endswith(b'{"ok":true,"api":"v1"}')
    assert TIMEOUT_S - 0.2 <= took < TIMEOUT_S + 5  # the body would have taken 20 s
