"""Named pause points inside commits, so fault tests can kill a real writer at each step.

Off unless ``$DAL_TEST_PAUSE`` names the point (a comma-separated list is fine): the process then
creates the file ``$DAL_TEST_PAUSE_FILE`` (when set, so the test knows it got there) and sleeps until it
is killed — or, when ``$DAL_TEST_RELEASE_FILE`` is set, until that file exists (then it goes on). Points, in the order a write passes them:

- ``petastorm-files-written``: a Petastorm write's new files are written, nothing else.
- ``petastorm-metadata-written``: its version directory is complete (old files linked, ``_common_metadata``).
- ``record-written``: a local version record is written and fsynced as a hidden temporary file, not published.
- ``after-storage-commit``: storage committed (Delta or Petastorm), the catalog not yet told.
"""

from __future__ import annotations

import os
import time

ENV = "DAL_TEST_PAUSE"
ENV_FILE = "DAL_TEST_PAUSE_FILE"
ENV_RELEASE = "DAL_TEST_RELEASE_FILE"
MAX_PAUSE_S = 600


def pause(point: str) -> None:
    """Sleep at ``point`` when ``$DAL_TEST_PAUSE`` names it (a test kills the process there)."""
    wanted = os.environ.get(ENV)
    if not wanted or point not in wanted.split(","):
        return
    marker = os.environ.get(ENV_FILE)
    if marker:
        with open(marker, "w") as f:
            f.write(f"{os.getpid()} {point}\n")
    release = os.environ.get(ENV_RELEASE)
    deadline = time.monotonic() + MAX_PAUSE_S
    while time.monotonic() < deadline:
        if release and os.path.exists(release):
            return
        time.sleep(0.05)
