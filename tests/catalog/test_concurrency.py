"""Several processes publishing versions of one dataset at once: distinct, gap-free numbers, nothing lost."""

from __future__ import annotations

import multiprocessing as mp

from dal.catalog import Catalog, Field, Schema, VersionDraft

WRITERS = 4
PUBLISHES = 25
SCHEMA = Schema((Field("id", "int64", False),))


def _writer(url: str, writer: int, start: mp.synchronize.Event) -> None:  # type: ignore[name-defined]
    cat = Catalog(url)
    # every writer races to create the dataset too; exactly one creates it, the others reuse it
    cat.create_dataset("race.ds", format="delta", location="/x", exist_ok=True)
    start.wait()
    for seq in range(PUBLISHES):
        cat.publish(
            "race.ds",
            VersionDraft("append", SCHEMA, row_count=seq, properties={"writer": writer, "seq": seq}),
        )
    cat.close()


def test_concurrent_publishers_get_gap_free_numbers(catalog_url: str) -> None:
    Catalog(catalog_url).close()  # migrate once up front (first-use migration has its own lock)
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(catalog_url, w, start)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=180)
    assert [p.exitcode for p in procs] == [0] * WRITERS

    versions = Catalog(catalog_url).versions("race.ds")
    assert [v.number for v in versions] == list(range(WRITERS * PUBLISHES))
    published = sorted((v.properties["writer"], v.properties["seq"]) for v in versions)
    assert published == [(w, s) for w in range(WRITERS) for s in range(PUBLISHES)]
    # each writer's own publishes keep their order
    for w in range(WRITERS):
        seqs = [v.properties["seq"] for v in versions if v.properties["writer"] == w]
        assert seqs == list(range(PUBLISHES))


def _first_use(url: str) -> None:
    Catalog(url).create_dataset("first.use", format="delta", location="/x", exist_ok=True)


def test_concurrent_first_use_migrates_once(catalog_url: str) -> None:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_first_use, args=(catalog_url,)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert [d.name for d in Catalog(catalog_url).list_datasets()] == ["first.use"]
