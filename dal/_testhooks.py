"""Named pause points inside commits, so fault tests can kill a real writer at each step.

Off unless ``$DAL_TEST_PAUSE`` names the point (a comma-separated list is fine): the process then
creates the file ``$DAL_TEST_PAUSE_FILE`` (when set, so the test knows it got there) and sleeps until it
is killed — or, when ``$DAL_TEST_RELEASE_FILE`` is set, until that file exists (then it goes on). Points, in the order a write passes them:

- ``intent-registered``: a write's intent is registered (``dal.storage.intents``), nothing staged yet.
- ``spark-files-staged``: a Spark write's executors staged every file; the driver has not committed.
- ``petastorm-files-written``: a Petastorm write's new files are written, nothing else.
- ``petastorm-metadata-written``: its version directory is complete (old files linked, ``_common_metadata``).
- ``record-written``: a local version record is written and fsynced as a hidden temporary file, not published.
- ``after-storage-commit``: storage committed (Delta or Petastorm), the catalog not yet told.
- ``version-recorded``: the catalog recorded the write's version; its tags are not set yet.

And in ``dal register`` / ``dal sync`` (and a write's recording):

- ``versions-recording``: the versions are described and their progress line is up; none is recorded yet.

And in ``dal gc`` / ``dal drop --purge``:

- ``gc-chosen``: gc synced the catalog and chose the versions to expire; no file listed yet.
- ``gc-listed``: gc chose what to delete (files listed), nothing marked or deleted yet.
- ``gc-expired``: the versions gc expires are marked expired in the catalog, no file deleted yet.
- ``gc-deleting``: the first file (a record or log entry, when any goes) is deleted, the others not yet.
- ``purge-marked``: a purge marked the location's claim ``purging``; nothing deleted yet.
- ``purge-data-deleted``: a purge deleted the data files, not yet the commit records or the catalog entry.
- ``purge-dropped``: a purge deleted every file and the catalog entry, not yet the location's claim.

And in ``dal optimize``:

- ``optimize-read``: optimize synced and chose the version it compacts; nothing written yet (Petastorm then
  passes ``petastorm-files-written`` too).
- ``rewrite-committed``: the compaction is committed in storage, the catalog not yet told.
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
