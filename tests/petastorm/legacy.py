"""The pinned legacy environment with the real petastorm 0.13.1, built once and cached.

petastorm cannot be installed beside a current pyarrow (it imports pyarrow.filesystem), so the interop
tests run it in its own venv. Newest combination found to work (materialize_dataset with partitionBy,
make_reader, make_batch_reader): the pins below, with Java 17 for Spark 3.5.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
from pathlib import Path

LEGACY_PINS = (
    "pyspark==3.5.9",
    "petastorm==0.13.1",
    "pyarrow==12.0.1",
    "numpy==1.26.4",
    "pandas==2.1.4",
    "opencv-python-headless==4.10.0.84",
)
SCRIPTS = Path(__file__).resolve().parent / "legacy_scripts"


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dal"
    digest = hashlib.sha256("\n".join(LEGACY_PINS).encode()).hexdigest()[:12]
    return base / f"petastorm-legacy-{digest}"


def legacy_python() -> Path:
    """The legacy venv's python, building the venv first if needed (under a lock; ~1 min with a warm pip cache)."""
    venv = cache_dir()
    python = venv / "bin" / "python"
    ready = venv / ".ready"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q", *LEGACY_PINS], check=True)
            check = subprocess.run(
                [str(python), "-c", "import petastorm, pyarrow; print(petastorm.__version__, pyarrow.__version__)"],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            ready.write_text(check.stdout)
    return python


def run_legacy(script: str, *args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """Run ``legacy_scripts/<script>`` with the legacy python (Spark workers use it too)."""
    python = legacy_python()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON")}
    env["PYSPARK_PYTHON"] = str(python)
    return subprocess.run(
        [str(python), str(SCRIPTS / script), *args], env=env, capture_output=True, text=True, timeout=timeout
    )
