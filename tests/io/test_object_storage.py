"""Inputs in object storage: the synthetic sample in a bucket of a real S3-compatible server (moto's
standalone server, on 127.0.0.1), read by URL through fsspec and s3fs.

The run over ``s3://`` gives the same documents, signals, rejects, duplicates and tokens, byte for
byte, as the run over the same files on disk; a glob matches objects as it matches files; an object
rewritten in place (same size) is read again; a URL whose package is missing is refused with the fix.
"""

from __future__ import annotations

import filecmp
import json
from pathlib import Path

import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

from lab import engine  # noqa: E402
from lab.config import Config, EngineConfig, InputConfig  # noqa: E402
from lab.errors import ConfigError  # noqa: E402
from lab.io import storage  # noqa: E402
from lab.io.listing import list_inputs  # noqa: E402

# what a run writes about its own making (timings, what it read, its config): the data is everything else
NOT_DATA = ("stats/", "done.json", "manifest.json", "config.yaml", "inputs.parquet", "tokenizer/fit.json",
            "tokenized/part-")


def _run(tmp_path: Path, name: str, path: str) -> Path:
    cfg = Config(name=name, output_dir=str(tmp_path), inputs=(InputConfig(path=path),), engine=EngineConfig(n_workers=1))
    engine.run(cfg, progress=False, client=engine.INPROCESS)
    return cfg.run_dir


def _data_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and not any(x in p.relative_to(root).as_posix() for x in NOT_DATA))


def test_a_run_over_s3_equals_the_run_over_the_same_files_on_disk(s3, synthetic_src, tmp_path):
    remote = _run(tmp_path, "remote", "s3://corpus/synthetic")
    local = _run(tmp_path, "local", str(synthetic_src))
    files = _data_files(local)
    assert len(files) > 20 and _data_files(remote) == files
    assert any(f.startswith("docs/") for f in files) and any(f.startswith("tokens/train/") for f in files)
    differ = [f for f in files if not filecmp.cmp(local / f, remote / f, shallow=False)]
    assert differ == []
    a, b = (json.loads((r / "manifest.json").read_text()) for r in (local, remote))
    assert a["funnel"] == b["funnel"] and a["inputs"]["files"] == b["inputs"]["files"] == 4
    # what it read is named by URL, with the store's ETag as its identity
    import pyarrow.parquet as pq

    listed = pq.read_table(remote / "inputs.parquet").to_pylist()
    assert {r["path"] for r in listed} >= {"s3://corpus/synthetic/documents.jsonl"}


def test_a_glob_matches_objects_as_it_matches_files(s3, synthetic_src):
    remote = list_inputs([InputConfig(path="s3://corpus/synthetic/*.jsonl*")])
    local = list_inputs([InputConfig(path=str(synthetic_src / "*.jsonl*"))])
    assert remote.files == local.files and [f for f, _, _ in remote.files[0]] == [
        "broken.jsonl", "documents.jsonl", "truncated.jsonl.gz"]
    assert remote.roots == ["s3://corpus/synthetic"]
    with pytest.raises(ConfigError, match="does not exist"):
        list_inputs([InputConfig(path="s3://corpus/nothing-here.jsonl")])


def test_an_object_rewritten_in_place_is_read_again(s3, synthetic_src, tmp_path):
    s3.put(str(synthetic_src / "broken.jsonl"), "corpus/edit/broken.jsonl")
    s3.put(str(synthetic_src / "documents.jsonl"), "corpus/edit/documents.jsonl")
    cfg = Config(name="edit", output_dir=str(tmp_path), inputs=(InputConfig(path="s3://corpus/edit"),),
                 engine=EngineConfig(n_workers=1))
    engine.run(cfg, progress=False, client=engine.INPROCESS)
    again = engine.run(cfg, progress=False, client=engine.INPROCESS)
    assert again["last_run"]["partitions_run"] == 0  # nothing changed: reused
    data = s3.cat("corpus/edit/documents.jsonl")
    i = data.index(b"the ")
    s3.pipe("corpus/edit/documents.jsonl", data[:i] + b"THE " + data[i + 4:])  # same size, new content
    before = storage.content_id("s3://corpus/edit/documents.jsonl")
    assert before[0] == len(data)
    third = engine.run(cfg, progress=False, client=engine.INPROCESS)
    assert third["last_run"]["partitions_run"] >= 1


def test_a_url_whose_package_is_missing_names_the_extra(monkeypatch):
    import fsspec

    def missing(url, **kw):
        raise ImportError("Install gcsfs to access Google Storage")

    monkeypatch.setattr(fsspec.core, "url_to_fs", missing)
    with pytest.raises(ConfigError, match=r"corpus-lab\[gcs\]"):
        list_inputs([InputConfig(path="gs://bucket/corpus")])


def test_an_object_is_identified_by_its_listing_without_asking_the_store_again(s3, tmp_path, monkeypatch):
    def asked(url):
        raise AssertionError(f"asked the store again for {url}")

    monkeypatch.setattr(storage, "content_id", asked)  # the listing's ETag and size are the object's identity
    m = _run(tmp_path, "listed", "s3://corpus/synthetic")
    assert m.exists() and m.joinpath("manifest.json").exists()
    one = list_inputs([InputConfig(path="s3://corpus/synthetic/documents.jsonl")])
    assert one.roots == ["s3://corpus/synthetic"] and [f for f, _, _ in one.files[0]] == ["documents.jsonl"]
    assert one.stored["s3://corpus/synthetic/documents.jsonl"][1].startswith("ETag:")
