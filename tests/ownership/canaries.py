"""The canary harness: sandboxes whose surroundings hold things dal did not make, and a tree hash that proves a
destructive operation left them alone.

A ``Sandbox`` is a fresh temporary folder (never a real system path) holding, around the dataset or cache root
an operation is pointed at: unrelated folders and files beside it (old mtimes, hidden ones), canaries at the
root itself, targets of symbolic links planted inside datasets and caches, and a second dataset sharing the
parent folder. ``touched()`` names every canary whose tree (paths, types, modes, sizes, mtimes, bytes, link
targets; links never followed) changed since it was planted. ``S3Sandbox`` is the same on the S3 emulator:
canary objects beside and inside the prefix, a second bucket a hostile table points into.
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.spark import convert_cache
from dal.storage import rangecache

OLD = time.time() - 3 * 86400  # canaries look abandoned: older than any grace period or safe age
SECRET_ROWS = pa.table({"secret": ["do-not-read"] * 3})
SCHEMA = TensorSchema(
    "S", [TensorField("id", np.int64, (), ScalarCodec()), TensorField("x", np.float32, (2,), NdarrayCodec())]
)
KEY = "0123456789abcdef" * 2 + "01234567"  # plan keys, as dal.convert makes them (40 hex digits)
DEAD_KEY = "89abcdef01234567" * 2 + "89abcdef"
DEAD = f"{socket.gethostname()}-{2**22 + 4321}"  # a pid no process has (above pid_max's default)


def _age(path: Path) -> None:
    os.utime(path, (OLD, OLD), follow_symlinks=False)


def tree_hash(path: Path) -> str:
    """A hash of everything at ``path`` (a file, a link, or a folder and all below it), links never followed."""
    h = hashlib.sha256()
    if not os.path.lexists(path):
        return "absent"
    stack = [path]
    while stack:
        p = stack.pop()
        st = os.lstat(p)
        h.update(f"{p.relative_to(path)}|{stat.S_IFMT(st.st_mode)}|{st.st_mode & 0o7777}|{st.st_mtime_ns}".encode())
        if stat.S_ISLNK(st.st_mode):
            h.update(os.readlink(p).encode())
        elif stat.S_ISREG(st.st_mode):
            h.update(p.read_bytes())
        elif stat.S_ISDIR(st.st_mode):
            stack += sorted((p / n for n in os.listdir(p)), reverse=True)
    return h.hexdigest()


@dataclass
class Sandbox:
    """Canaries around (and inside) the roots dal is pointed at, all under ``base`` (a pytest tmp_path)."""

    base: Path
    canaries: dict[Path, str] = field(default_factory=dict)
    roots: list[Path] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self.outside = self.base / "outside"  # what links inside datasets point to
        self.plant(self.base / "precious" / "thesis.tex", b"\\documentclass{article} years of work\n")
        self.plant(self.base / "projectA" / "notes" / "plan.md", b"# plan\n")
        self.plant(self.base / "notes.txt", b"shopping list\n")
        self.plant(self.base / ".hidden" / "config", b"secret=1\n")
        self.plant(self.base / "0123456789abcdef0123456789abcdef01234567.ready", b'{"entry": "../precious"}')
        self.plant(self.base / "v1" / "ab" / ("c" * 64) / "0-10", b"not dal's!")  # looks like a file cache range
        self.plant(self.outside / "secret.parquet", _parquet_bytes())
        self.plant(self.outside / "deep" / "keep.txt", b"behind a link\n")

    def plant(self, path: Path, data: bytes, watch: Path | None = None) -> Path:
        """A canary file (and its folders), old. Watched: ``watch``, else its folder right below the sandbox, or
        right below the managed root (``manage``) it is in."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        for p in [path, *path.parents]:
            if p == self.base or self.base not in p.parents:
                break
            _age(p)
        home = next((r for r in self.roots if r in path.parents), self.base)
        self.watch(watch or home / path.relative_to(home).parts[0])
        return path

    def manage(self, root: Path) -> Path:
        """A root dal is pointed at (a dataset, a cache): what dal makes there is its own; canaries planted
        inside it are watched one by one."""
        self.roots.append(root)
        return root

    def plant_inside(self, root: Path) -> None:
        """Canaries at a dataset's or cache's root itself: a foreign folder (old, as an abandoned conversion
        would be) and a foreign file."""
        self.manage(root)
        self.plant(root / "projectB" / "thesis.tex", b"inside the root, still not dal's\n")
        self.plant(root / "README.txt", b"a user's note in the root\n")

    def link(self, at: Path, target: Path) -> Path:
        """A symbolic link ``at`` (inside a dataset or cache) to ``target`` (a canary, watched)."""
        at.parent.mkdir(parents=True, exist_ok=True)
        at.symlink_to(target, target_is_directory=target.is_dir())
        self.watch(target)
        return at

    def watch(self, path: Path) -> None:
        """Hash ``path`` now; ``touched`` compares against it."""
        self.canaries[path] = tree_hash(path)

    def touched(self) -> list[str]:
        """The canaries whose tree changed (empty: dal left everything it did not make alone)."""
        return sorted(str(p.relative_to(self.base)) for p, h in self.canaries.items() if tree_hash(p) != h)


def _parquet_bytes() -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(SECRET_ROWS, sink)
    return bytes(sink.getvalue().to_pybytes())


# -- object storage ------------------------------------------------------------------------------------------


def s3_client(options: dict[str, str]) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=options["AWS_ENDPOINT_URL"], region_name="us-east-1",
                        aws_access_key_id=options["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=options["AWS_SECRET_ACCESS_KEY"])  # fmt: skip


@dataclass
class S3Sandbox:
    """Canary objects in ``bucket`` (beside and inside the prefixes dal is pointed at) and in a second bucket,
    ``victim``, that hostile metadata points into."""

    bucket: str
    options: dict[str, str]
    canaries: dict[tuple[str, str], str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.client = s3_client(self.options)
        self.victim = f"victim-{uuid.uuid4().hex[:10]}"
        self.client.create_bucket(Bucket=self.victim)
        self.plant(self.bucket, "precious/thesis.tex", b"years of work")
        self.plant(self.bucket, "projectA/notes/plan.md", b"# plan")
        self.plant(self.bucket, "notes.txt", b"shopping list")
        self.plant(self.victim, "private/secret.parquet", _parquet_bytes())

    def plant(self, bucket: str, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)
        self.watch(bucket, key)

    def plant_inside(self, prefix: str) -> None:
        """Canary objects at a dataset's or cache's prefix itself."""
        self.plant(self.bucket, f"{prefix}/projectB/thesis.tex", b"inside the prefix, still not dal's")
        self.plant(self.bucket, f"{prefix}/README.txt", b"a user's note")

    def watch(self, bucket: str, key: str) -> None:
        self.canaries[(bucket, key)] = self._hash(bucket, key)

    def _hash(self, bucket: str, key: str) -> str:
        try:
            body = self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except self.client.exceptions.NoSuchKey:
            return "absent"
        return hashlib.sha256(body).hexdigest()

    def touched(self) -> list[str]:
        return sorted(f"s3://{b}/{k}" for (b, k), h in self.canaries.items() if self._hash(b, k) != h)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []) if not o["Key"].endswith("/"))


# -- worlds: datasets and caches with canaries around and inside them -----------------------------------------


def petastorm_rows(start: int) -> list[dict[str, object]]:
    return [{"id": i, "x": np.full(2, i, np.float32)} for i in range(start, start + 3)]


def write_history(base: str, options: dict[str, str] | None = None) -> None:
    """``c.delta`` and ``c.pet`` with old versions (overwrites: their files are garbage once expired) and a
    neighbour, ``c.other``, sharing the parent folder (in the default catalog)."""
    for i in range(3):
        dal.write(pa.table({"id": [i, i + 1]}), "c.delta", path=f"{base}/ds.delta",
                  mode="overwrite" if i else "append", storage_options=options)  # fmt: skip
    for i in range(2):
        dal.write(petastorm_rows(i), "c.pet", format="petastorm", schema=SCHEMA, path=f"{base}/ds.petastorm",
                  mode="overwrite" if i else "append", storage_options=options)  # fmt: skip
    dal.write(pa.table({"id": [7]}), "c.other", path=f"{base}/other.delta", storage_options=options)


def local_world(sb: Sandbox) -> Sandbox:
    """Datasets (``ds.delta``, ``ds.petastorm``, the neighbour ``other.delta``), a converter cache (``cache``: a
    published entry, an abandoned one) and a file cache (``filecache``: one old range) in the sandbox, with
    canaries and links to canaries inside each."""
    write_history(str(sb.base))
    sb.watch(sb.base / "other.delta")
    for ds in ("ds.delta", "ds.petastorm"):
        sb.plant_inside(sb.base / ds)
    sb.link(sb.base / "ds.delta" / "date=2099-01-01", sb.outside)
    v0 = next(p for p in (sb.base / "ds.petastorm").iterdir() if p.name.startswith("v0-"))
    sb.link(v0 / "shared", sb.base / "projectA")
    cache = convert_cache.cache_root(str(sb.base / "cache"))
    folder = convert_cache.begin(cache, KEY)
    (folder / "catalog.db").write_text("complete")
    convert_cache.publish(cache, KEY, folder, rows=1)
    dead = cache / f"{DEAD_KEY}-deadbeef0000"
    (dead / "table").mkdir(parents=True)
    (dead / "users").mkdir()
    (dead / "users" / DEAD).touch()
    os.utime(dead, (OLD, OLD))
    sb.plant_inside(cache)
    sb.link(cache / f"{DEAD_KEY}-0123456789ab", sb.outside)
    files = sb.base / "filecache"
    rangecache.FileCache.create(str(files), "1MB")
    rng = files / "v1" / "0f" / ("0" * 64) / "0-100"
    rng.parent.mkdir(parents=True)
    rng.write_bytes(b"r" * 100)
    os.utime(rng, (OLD, OLD))
    sb.plant_inside(files)
    sb.link(files / "v1" / "1f", sb.outside)
    return sb


def s3_world(sb: S3Sandbox, prefix: str) -> str:
    """As ``local_world`` under ``s3://<bucket>/<prefix>`` (no links on object stores); returns that URL."""
    base = f"s3://{sb.bucket}/{prefix}"
    write_history(base, sb.options)
    for key in sb.keys(sb.bucket, f"{prefix}/other.delta/"):
        sb.watch(sb.bucket, key)
    for ds in ("ds.delta", "ds.petastorm"):
        sb.plant_inside(f"{prefix}/{ds}")
    root = convert_cache.remote_root(f"{base}/cache", sb.options)
    folder = convert_cache.remote_begin(root, KEY)
    root.write(f"{folder}/table/part-0.parquet", b"x")
    convert_cache.remote_publish(root, KEY, folder, rows=1)
    root.write(f"{DEAD_KEY}-deadbeef0000/table/_delta_log/00000000000000000000.json", b"{}")
    root.write(f"{DEAD_KEY}-deadbeef0000/users/{DEAD}", b"")
    sb.plant_inside(f"{prefix}/cache")
    return base
