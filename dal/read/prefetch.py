"""Reading ahead on a thread: ``prefetch`` runs an iterator on a producer thread a bounded number of items ahead,
and stops and joins every producer before the interpreter finalizes.

A producer thread alive when CPython finalizes is ended with ``pthread_exit`` as soon as it wants the GIL; inside
C++ frames that unwinding aborts the process ("terminate called without an active exception", exit status -6):
inside pyarrow (a scan step), or inside torch (a thread dropping the last reference to a tensor made by
``torch.from_numpy`` takes the GIL back in C++). So producers stay listed until their thread has ended, and an
atexit hook (which runs while threads still run) stops and joins them.
"""

from __future__ import annotations

import atexit
import queue
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, TypeVar

T = TypeVar("T")

# producer threads, with their stop events, kept until they have ended: an iterator left open (or closed just
# before) when the interpreter exits has its producer stopped and joined by ``_stop_producers`` (an atexit hook,
# which runs while threads still run)
_PRODUCERS: dict[threading.Thread, threading.Event] = {}
_PRODUCERS_LOCK = threading.Lock()
EXIT_JOIN_S = 5.0  # how long the exit waits for producers to finish the step they are in


def _stop_producers() -> None:
    """Stop every producer and wait until its thread has ended. Left running, a producer thread inside C++ when
    the interpreter finalizes is ended by CPython with pthread_exit, whose unwinding through C++ frames aborts
    the process ("terminate called without an active exception"): inside pyarrow (a scan step), or inside torch
    (a thread dropping the last reference to a tensor made by ``torch.from_numpy`` takes the GIL back in C++).
    A producer that returned may still be tearing down its frame (its last chunk's tensors): it is joined too."""
    with _PRODUCERS_LOCK:
        running = list(_PRODUCERS.items())
    for _, stop in running:
        stop.set()
    deadline = time.monotonic() + EXIT_JOIN_S
    for thread, _ in running:
        thread.join(max(0.0, deadline - time.monotonic()))


atexit.register(_stop_producers)


def _register(thread: threading.Thread, stop: threading.Event) -> None:
    with _PRODUCERS_LOCK:
        for ended in [t for t in _PRODUCERS if not t.is_alive() and t.ident is not None]:
            del _PRODUCERS[ended]
        _PRODUCERS[thread] = stop


def _offer(q: queue.Queue[Any], item: Any, stop: threading.Event) -> bool:
    """Put ``item`` once there is room; False when ``stop`` is set first (the consumer is gone)."""
    while not stop.is_set():
        try:
            q.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def prefetch(source: Iterator[T], depth: int) -> Iterator[T]:
    """Run ``source`` on a background thread, at most ``depth`` items ahead (bounded memory)."""
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def produce() -> None:
        try:
            for item in source:
                if not _offer(q, item, stop):
                    return
                del item  # the consumer's now: never the last reference, dropped by this thread at exit
            _offer(q, done, stop)
        except BaseException as e:  # handed to the consumer
            _offer(q, e, stop)

    thread = threading.Thread(target=produce, daemon=True, name="dal-prefetch")
    _register(thread, stop)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        close = getattr(source, "close", None)
        # the source runs on the producer: close it here only once that thread is done with it (at interpreter
        # exit, an iterator left open has a producer frozen mid-step: the source is not closed, nothing printed)
        if close is not None and not thread.is_alive() and not sys.is_finalizing():
            close()
