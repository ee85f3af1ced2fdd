"""CPU seconds (user + system) of a benchmark's whole process tree, for deltas around each case.

``tree_cpu_seconds()`` counts each process once, whether it is alive or gone at the moment of reading:

- this process, every thread: ``getrusage(RUSAGE_SELF)``;
- children it has reaped, and what they reaped in turn: ``getrusage(RUSAGE_CHILDREN)`` (a plain
  ``DataLoader(num_workers=2)``'s workers are joined, so reaped, at the end of each epoch);
- descendants still alive (persistent DataLoader workers, a forkserver and what it forked): their
  ``/proc/PID/stat`` utime + stime, plus cutime + cstime for what they reaped themselves.

A process moves from the third to the second kind when it is reaped; its CPU stays counted once. What a
descendant re-parented to init (a double fork) spends is not counted.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _live_descendants_ticks(root: int) -> int:
    """utime + stime + cutime + cstime (clock ticks) of every live descendant of ``root`` (not ``root``)."""
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # the command name may hold spaces and ')'
        except OSError:  # gone since the listing
            continue
        pid = int(stat.parent.name)
        parent[pid] = int(fields[1])
        ticks[pid] = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        total += ticks[pid]
        todo.extend(children.get(pid, ()))
    return total


def tree_cpu_seconds() -> float:
    """CPU seconds so far of this process, its reaped children and its live descendants (see the module)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = me.ru_utime + me.ru_stime + reaped.ru_utime + reaped.ru_stime
    return own + _live_descendants_ticks(os.getpid()) / TICK
