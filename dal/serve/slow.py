"""Slow clients (slowloris): what bounds a connection that sends its request headers or body a byte at a time.

uvicorn (0.54) bounds the idle time between keep-alive requests (``timeout_keep_alive``), the size of an incomplete
request head (``h11_max_incomplete_event_size``) and, with ``limit_concurrency``, the open connections (a request
beyond them is answered 503). It does not bound the time a client takes to send its request head, nor its body: a
connection that trickles a header byte every few seconds is kept forever, and counts against the connection
limit. So ``dal serve`` adds both:

- **headers**: ``HeaderTimeoutProtocol`` (uvicorn's h11 protocol) gives a connection ``header_timeout`` seconds from
  its start, and from the end of each response on a kept-alive connection, to send a whole request head; then it is
  answered ``408`` (JSON, as every error) and closed, however many bytes arrived meanwhile.
- **body**: ``BodyLimit`` (``dal.serve.app``) gives the body ``body_timeout`` seconds from the request head, all of
  it; then the request is answered ``408`` and the connection closed (what was sent is never used). A body the
  route does not read (a GET's) has the same deadline here: once answered, a connection still receiving it
  after ``body_timeout`` seconds is closed (uvicorn would keep it as long as the bytes trickle).

Asyncio serves each connection as a socket, not a thread: slow connections hold no worker; the connection limit
is what they can exhaust, for at most ``header_timeout`` (or ``body_timeout``) seconds each.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 60.0
MAX_CONNECTIONS = 1000
KEEP_ALIVE_S = 5


def _timeout_answer(message: str) -> bytes:
    body = json.dumps({"error": message, "type": "DalError"}).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode("ascii") + body


def protocol(header_timeout: float, body_timeout: float | None = None) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a deadline for each request head (``header_timeout`` seconds) and, for a body
    that is not read, ``body_timeout`` seconds after the head (None: none)."""

    class HeaderTimeoutProtocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None
        _body_timer: asyncio.TimerHandle | None = None
        _body_late = False

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(header_timeout, self._expired)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _expired(self) -> None:
            self._header_timer = None
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return
            if self.cycle is not None and not self.cycle.response_complete:  # a response still under way
                return
            self.transport.write(_timeout_answer(f"the request head was not received within {header_timeout:g} s"))
            self.transport.close()

        def _body_expired(self) -> None:
            self._body_timer, self._body_late = None, True
            self._close_if_unread()

        def _close_if_unread(self) -> None:
            """Close an answered connection whose body is still coming after its deadline (the route did not read
            it; one that reads it answers 408 itself, ``BodyLimit``)."""
            answered = self.cycle is None or self.cycle.response_complete
            if self._body_late and answered and self.conn.their_state is h11.SEND_BODY:
                self.transport.close()

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # the head is in (or the connection is done): no deadline
                self._disarm()
            if self.conn.their_state is h11.SEND_BODY and self._body_timer is None and not self._body_late:
                if body_timeout is not None:
                    self._body_timer = self.loop.call_later(body_timeout, self._body_expired)
            elif self.conn.their_state is not h11.SEND_BODY and self._body_timer is not None:
                self._body_timer.cancel()  # the body is in
                self._body_timer = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._close_if_unread()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._arm()  # the next request on a kept-alive connection: its head has the same deadline

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None
            super().connection_lost(exc)

    return HeaderTimeoutProtocol
