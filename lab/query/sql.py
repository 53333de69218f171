"""sql: the small SQL helpers every query module shares: quoting, an empty table of a schema, DuckDB's
Arrow result as one table.

>>> print(ident("order"), quote("it's"))
"order" 'it''s'
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa


def quote(s: str) -> str:
    """A string literal."""
    return "'" + s.replace("'", "''") + "'"


def ident(name: str) -> str:
    """A quoted identifier (a column named like a keyword, or with quotes in it)."""
    return '"' + name.replace('"', '""') + '"'


def empty_table(schema: pa.Schema) -> str:
    """A subquery with ``schema``'s columns and no rows."""
    types = {pa.int64(): "BIGINT", pa.int16(): "SMALLINT", pa.float64(): "DOUBLE"}
    return "(SELECT " + ", ".join(f"NULL::{types[f.type]} AS {ident(f.name)}" for f in schema) + " LIMIT 0)"


def to_arrow(rel: duckdb.DuckDBPyRelation) -> pa.Table:
    """A relation's rows as one Arrow table (DuckDB versions return a table or a batch reader)."""
    out = rel.arrow()
    return out.read_all() if isinstance(out, pa.RecordBatchReader) else out


def register_ids(cur: duckdb.DuckDBPyConnection, name: str, ids: np.ndarray) -> str:
    """Register ``ids`` with the cursor as table ``name``; the condition selecting those documents."""
    cur.register(name, pa.table({"doc_id": pa.array(ids, pa.int64())}))
    return f"doc_id IN (SELECT doc_id FROM {name})"
