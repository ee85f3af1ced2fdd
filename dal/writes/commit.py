"""A planned write's storage commit and its recording in the catalog: ``store`` (the intent registered, the
claim taken, the rows written and committed) and ``record`` (the catalog versions, lineage, the time-partition
rule the rows kept, tags). ``dal._testhooks.pause`` marks each step so fault tests kill a real writer there."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from dal import lineage, progress
from dal._testhooks import pause
from dal.catalog import CatalogReadOnly, CatalogUnavailable, DatasetInfo, VersionInfo
from dal.errors import DalError, FormatError, TagExists
from dal.formats.inputs import is_spark_dataframe
from dal.storage import claims, intents, timeparts
from dal.storage.location import Location
from dal.storage.timeparts import TimePartitions
from dal.writes.recording import check_claim, first_line, holder_of, is_read_only, not_recorded, sync
from dal.writes.refusals import PlannedWrite

if TYPE_CHECKING:
    from dal.catalog import Catalog

_log = logging.getLogger("dal")


def store(plan: PlannedWrite) -> int | None:
    """Write the rows and commit them in storage (Spark's executors for a Spark DataFrame); the storage version
    (a delete: None when no row matched and nothing was committed).

    A write in flight is registered before anything is staged: gc and purge leave its files alone.
    """
    data, name = plan.request.data, plan.request.name
    loc = Location.of(plan.location, plan.options)
    with intents.registered(loc, plan.opts.write_id, name):
        pause("intent-registered")
        # claimed with the intent registered: a purge marks the claim, then looks for intents; one of the two
        # sees the other, so a write never commits into a location being purged
        checked = check_claim(plan.cat, name, plan.fmt, plan.location, plan.options, "write",
                              recorded=plan.existing is not None, read_only=is_read_only(plan.existing))  # fmt: skip
        fresh = plan.existing is None and checked.created  # this write claimed the location
        try:
            with progress.task(f"writing {name}", total=progress.rows_of(data)):  # a line on a terminal only
                if plan.request.delete:
                    storage_version = plan.txn.delete_rows()
                elif is_spark_dataframe(data):
                    from dal.spark.write import write_dataframe

                    storage_version = write_dataframe(data, plan.fmt, plan.txn)
                    _read_partitions(plan)
                else:
                    storage_version = plan.txn.write_prepared(plan.prepared)
        except BaseException:
            if fresh and not plan.fmt.exists(plan.location, plan.options):  # a refused first write leaves nothing
                claims.release(loc, claims.Holder(plan.cat.catalog_id, plan.cat.display, name))
            raise
    pause("after-storage-commit")
    return storage_version


def _read_partitions(plan: PlannedWrite) -> None:
    """``overwrite='partitions'`` from Spark: the version read, with the rows of the partitions it did not
    replace, is an input of the new one (known only once the executors reported the partitions they wrote)."""
    where, existing = plan.txn.opts.where, plan.existing
    if not plan.opts.partitions or where is None or existing is None or existing.latest_version is None:
        return
    from dal import expr as E
    from dal.catalog.types import DECLARED, Input

    plan.upstream.append(Input(plan.request.name, existing.latest_version, f"NOT ({E.to_sql(where)})", DECLARED))


def record(plan: PlannedWrite, storage_version: int) -> VersionInfo:
    """Record a committed write: the version (and anything other writers committed before it), its lineage, the
    time-partition rule its rows kept, its tags.

    Raises:
        CommittedNotRecorded: the rows are stored, and a retry would store them twice. TagExists (and the
            catalog's errors) from tagging, saying the data is recorded.
    """
    req, cat = plan.request, plan.cat
    version = _record(cat, req.name, req.format, plan.location, plan.options, storage_version, plan.existing,
                      plan.create, description=req.description, time_column=req.time_column,
                      time_partitions=req.time_partitions, rule=plan.rule)  # fmt: skip
    if req.track:
        plan.reads_done()  # committed: the next write's inferred inputs start after this one
    try:  # only the version this write committed (not others' commits that sync recorded with it)
        version = cat.record_lineage(req.name, version.number, lineage.KEY, plan.produced_by,
                                     lineage.unique(plan.upstream))  # fmt: skip
    except DalError as e:  # recorded already: a lineage the catalog refused must not fail the write
        _log.warning("%s version %d: lineage not recorded (%s)", req.name, version.number, e)
    pause("version-recorded")
    try:
        version = _record_rule(cat, version, plan.txn.observer, req.mode)
    except DalError as e:  # a rule not recorded only means windows do not prune this version's partitions
        _log.warning("%s version %d: time partitions not recorded (%s)", req.name, version.number, e)
    return _tag_written(cat, req.name, plan.location, version, tuple(req.tags or ()))


def _record(
    cat: Catalog,
    name: str,
    format: str,
    location: str,
    options: dict[str, str],
    storage_version: int,
    existing: DatasetInfo | None,
    create: Callable[[], None],
    *,
    description: str | None,
    time_column: str | None,
    time_partitions: TimePartitions | None,
    rule: TimePartitions | None,
) -> VersionInfo:
    """Record a committed write in the catalog (creating a new dataset, updating what the write changed) and
    return the version that holds ``storage_version``.

    Raises:
        CommittedNotRecorded: any failure (the rows are stored: a retry would store them twice).
    """
    try:
        if existing is None:
            create()
        else:
            current = cat.get_dataset(name)  # renamed or dropped while this write ran: not recorded under it
            if current.location != location:
                raise DalError(f"{name} is now the dataset at {current.location}, not {location}")
            if description is not None or time_column is not None or time_partitions is not None:
                props = {timeparts.DATASET_KEY: rule.to_json()} if time_partitions is not None and rule else None
                cat.update_dataset(name, description=description, time_column=time_column, properties=props)
        recorded = sync(name, options, cat)
        version = next((v for v in recorded if v.storage_version == storage_version), None)
        if version is None:  # recorded meanwhile by a concurrent writer's sync
            version = next((v for v in cat.versions(name) if v.storage_version == storage_version), None)
        if version is None:
            raise FormatError(f"storage version {storage_version} is not among the versions sync found")
    except Exception as e:
        raise not_recorded(cat, name, format, location, storage_version, e, first=existing is None) from e
    return version


def _tag_written(cat: Catalog, name: str, location: str, version: VersionInfo, tags: Sequence[str]) -> VersionInfo:
    """Tag the version a write recorded.

    Raises:
        TagExists, CatalogUnavailable, CatalogReadOnly, DalError: tagging failed; the message says the data is
            recorded and must not be written again.
    """
    try:
        for t in tags:
            version = cat.tag(name, version.number, t)
    except Exception as e:  # recorded: a retry would duplicate the rows
        kind = type(e) if isinstance(e, TagExists | CatalogUnavailable | CatalogReadOnly) else DalError
        raise kind(
            f"{name}: the data was written and recorded as version {version.number}, but tagging it failed "
            f"({first_line(e)}); do NOT retry the write: tag it with `dal tag {holder_of(cat, name, location)} "
            f"{version.number} TAG`"
        ) from e
    return version


def _record_rule(cat: Catalog, version: VersionInfo, check: timeparts.RuleCheck | None, mode: str) -> VersionInfo:
    """Record the time-partition rule every row of ``version`` keeps: this write's rows kept it, and the version
    it extends (an append) has it recorded. A declared rule is the dataset's; nothing to record per version."""
    rule = check.proven() if check is not None and not check.declared else None
    if rule is None:
        return version
    if mode == "append" and version.number > 0:
        before = cat.version(version.dataset, version.number - 1)
        if timeparts.TimePartitions.from_json(before.properties.get(timeparts.VERSION_KEY)) != rule:
            return version  # rows dal did not check (or checked against another rule) are in this version too
    if any(p not in version.partition_columns for p in rule.partitions):
        return version
    return cat.annotate_version(version.dataset, version.number, timeparts.VERSION_KEY, rule.to_json())
