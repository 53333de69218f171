"""corpus-lab: annotate once, select many times, materialize once.

The pipeline, package by package: ``io`` reads the inputs (listing, partitions, readers) and writes a
run directory; ``annotate`` runs every stage of ``stages`` over a partition (using ``text`` for
languages and words); ``dedup`` finds exact and near duplicates across partitions; ``select`` turns a
config into rules and ``query`` evaluates them in DuckDB over the run's Parquet; ``tokens`` turns the
kept documents into tokenized, mixed, split, packed shards and reads them back; ``plan`` sizes the
next run. ``engine`` runs the ``steps`` on Dask, ``manifest`` and ``check`` say what a run holds,
``cli`` is the command line, ``config`` the YAML, ``quality`` the labels and classifiers.
"""

__version__ = "0.1.0"
