"""io: files in, files out. In: the config's inputs (paths, globs, links; JSONL, Parquet, text, HTML,
WARC); out: partitions of documents and a run directory of Parquet and JSON files.

``inputs`` declares the inputs and ingest sections; ``listing`` walks them (every file read once or
skipped with its reason); ``partitions`` groups files and cuts large ones; ``readers`` and
``decoding`` turn bytes into documents or rejects; ``run`` is the run directory's layout, ``schema``
its tables, ``writers`` the atomic writes, ``lock`` the run lock, ``labels`` the label files.
"""
