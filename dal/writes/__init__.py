"""``dal.write``'s pipeline, below the public functions of ``dal.api``.

``dal.api.write`` takes the caller's keywords and hands them here, in steps a reader can follow top to bottom:

- ``refusals``: every refusal of a write, in order (``refusals.arguments`` before the catalog is opened,
  ``refusals.plan`` after): nothing reaches storage before all of them passed. The result is a ``PlannedWrite``.
- ``commit``: the intent registered, the claim taken, the rows written and committed in storage (``commit.store``),
  then recorded in the catalog with lineage, time-partition rule and tags (``commit.record``).
- ``recording``: what records storage versions in the catalog (``sync`` and ``register`` use it too), and the
  claim check every write, register, sync and maintenance operation makes.
- ``changes``: writes that replace part of a dataset or delete rows (``where=``, ``overwrite='partitions'``,
  ``dal.delete``): the predicate, bound against the version they read.
- ``credentials``: through a ``dal serve`` catalog, the write begins there (WRITE on the dataset) and writes
  storage with the short-lived credentials the server vends for it, if any, in place of the caller's own.

(The package is ``dal.writes``, not ``dal.write``: ``dal.write`` is the public function.)
"""
