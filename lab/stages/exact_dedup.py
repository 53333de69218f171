"""exact_dedup: one document per normalized-content hash, among the documents still alive.

The signal is a 64-bit BLAKE2b hash of the text after normalization (Unicode NFKC, lowercased,
runs of whitespace collapsed, leading/trailing whitespace stripped), so copies that differ only
in case or spacing collide. The rule is selection-aware: the lowest ``doc_id`` of each hash
group *among the documents that passed every earlier stage* is kept, so filtering out a group's
first member never loses the whole group (a window function in ``lab.query``).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass

import pyarrow as pa

from lab.fields import knob
from lab.select.rules import Rule

NAME = "exact_dedup"
VERSION = 1  # bump when signals() (or what it reads: word lists, models) gives other values
SOURCE = "corpus-lab (normalized-content hash; the lowest doc_id of each group is kept)"
_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document has the lowest doc_id of the surviving documents with its "
                              "normalized text; off: exact copies are all kept.")


SIGNALS = {"content_hash": pa.int64()}


def normalize(text: str) -> str:
    """
    >>> normalize("  Hello\\n\\tWORLD ")
    'hello world'
    """
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


def signals(text: str) -> dict:
    digest = hashlib.blake2b(normalize(text).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return {"content_hash": int.from_bytes(digest, "little", signed=True)}


def rules(cfg: Config) -> list[Rule]:
    return [Rule(NAME, "content_hash", "first_in_group", None, "duplicate")]
