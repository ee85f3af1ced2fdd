"""The benchmarks' CPU accounting (``benchmarks/proc_cpu.py``) counts worker processes, gone or alive.

A plain ``DataLoader(num_workers=2)`` joins its workers at the end of an epoch: measuring only live
processes missed all they spent (issue #34).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3:\n    pass\n"


def proc_cpu() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "proc_cpu.py"
    spec = importlib.util.spec_from_file_location("proc_cpu", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_child_that_exited_and_was_reaped_is_counted() -> None:
    cpu = proc_cpu()
    before = cpu.tree_cpu_seconds()
    subprocess.run([sys.executable, "-c", BURN], check=True)  # burns ~0.3 s of CPU, exits, is reaped
    assert cpu.tree_cpu_seconds() - before >= 0.2


def test_a_child_still_alive_and_what_it_reaped_are_counted() -> None:
    """A live worker (a persistent DataLoader worker, a forkserver) is read from /proc, with its own reaped
    children: here a child that burned ~0.3 s itself, then ran a grandchild burning ~0.3 s, then waits."""
    cpu = proc_cpu()
    code = f"import subprocess, sys\n{BURN}subprocess.run([sys.executable, '-c', {BURN!r}])\nprint('done', flush=True)\nsys.stdin.read()\n"
    before = cpu.tree_cpu_seconds()
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "done"
        time.sleep(0.05)
        assert child.poll() is None
        assert cpu.tree_cpu_seconds() - before >= 0.45  # both burns, ~0.6 s; /proc counts in clock ticks
    finally:
        child.communicate("")
