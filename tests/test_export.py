"""export-megatron: the split read back by megatron-core's own IndexedDataset, document by document."""

import struct
import warnings
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from lab.tokens.export import DTYPE_CODES, MAGIC
from lab.tokens.shards import read_manifest


def _split_docs(split_dir: Path) -> list[int]:
    """The split's doc_ids in order of first appearance (the export's order)."""
    m = read_manifest(split_dir)
    seen: dict[int, None] = {}
    for info in m.shards:
        for d in np.load(split_dir / f"{info.name}.pieces.npy")[:, 0].tolist():
            seen.setdefault(d, None)
    return list(seen)


def test_export_megatron_read_back_by_megatron_core(tokens_run, tmp_path, corpus_lab):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no apex / transformer-engine on a CPU machine: megatron warns, works
        indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset")  # .ci/setup --test installs it
    run_dir = Path(tokens_run.run_dir)
    r = corpus_lab("export-megatron", run_dir, "--split", "train", "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    prefix = tmp_path / "train_text_document"
    ds = indexed.IndexedDataset(str(prefix))
    m = read_manifest(run_dir / "tokens" / "train")
    docs = _split_docs(run_dir / "tokens" / "train")
    ids = {}
    for f in sorted((run_dir / "tokenized").glob("part-*.parquet")):
        t = pq.read_table(f, columns=["doc_id", "ids"])
        ids.update(zip(t.column("doc_id").to_pylist(), t.column("ids").to_pylist()))
    assert len(ds) == len(docs) > 100 and f"{len(docs)} documents" in r.stdout
    assert ds.document_indices.tolist() == list(range(len(docs) + 1))
    for i, d in enumerate(docs):  # best_fit truncates nothing: each sequence is the whole document + EOD
        assert ds[i].tolist() == ids[d] + [m.eod_id], i
    assert int(ds.sequence_lengths.sum()) == sum(s.real_tokens for s in m.shards)
    assert ds[0].dtype == np.uint16


def test_idx_header_by_the_format_spec(tokens_run, tmp_path):
    """An independent reading of the .idx by the format's layout (also where megatron-core is absent)."""
    from lab.tokens.export import export_megatron

    split_dir = Path(tokens_run.run_dir) / "tokens" / "val"
    r = export_megatron(split_dir, tmp_path / "val")
    raw = (tmp_path / "val.idx").read_bytes()
    assert raw[:9] == MAGIC and struct.unpack("<Q", raw[9:17]) == (1,) and raw[17] == DTYPE_CODES["uint16"]
    s, d = struct.unpack("<QQ", raw[18:34])
    lengths = np.frombuffer(raw, "<i4", s, 34)
    pointers = np.frombuffer(raw, "<i8", s, 34 + 4 * s)
    assert s == r["documents"] == len(_split_docs(split_dir)) and d == s + 1
    assert len(raw) == 34 + 4 * s + 8 * s + 8 * d
    assert pointers.tolist() == (np.r_[0, np.cumsum(lengths)[:-1]] * 2).tolist()
    assert (tmp_path / "val.bin").stat().st_size == 2 * int(lengths.sum()) == 2 * r["tokens"]
