"""plan(): expansion of inputs into files, format resolution, splitting, determinism, config errors."""

from __future__ import annotations

import gzip
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lab.config import IngestConfig, InputConfig
from lab.errors import ConfigError
from lab.io.listing import list_inputs
from lab.io.partitions import Partition, format_of, plan


def jsonl(n: int, width: int = 50) -> bytes:
    return b"".join(json.dumps({"text": f"doc {i} " + "x" * width}).encode() + b"\n" for i in range(n))


@pytest.fixture
def tree(tmp_path):
    """A directory of every format: 2 jsonl (one gz), a parquet, a warc, 3 text files, a hidden file."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.jsonl").write_bytes(jsonl(10))
    (tmp_path / "sub" / "b.jsonl.gz").write_bytes(gzip.compress(jsonl(10)))
    pq.write_table(pa.table({"text": ["x", "y"]}), tmp_path / "c.parquet")
    (tmp_path / "d.warc").write_bytes(b"WARC/1.1\r\n")
    (tmp_path / "notes.md").write_text("# notes")
    (tmp_path / "sub" / "e.txt").write_text("hello")
    (tmp_path / "README").write_text("read me")
    (tmp_path / ".hidden.jsonl").write_text("{}")
    return tmp_path


def test_format_of_extensions():
    assert format_of("a.JSONL") == "jsonl"
    assert format_of("a.ndjson.zstd") == "jsonl"
    assert format_of("a.json.gz") == "jsonl"
    assert format_of("a.txt.gz") is None
    assert format_of("a.warc.gz") == "warc"
    assert format_of("a.pq") == "parquet"
    assert format_of("a.rst") == "text"


def test_directory_auto_resolves_every_format_sorted(tree):
    parts = plan([InputConfig(str(tree))], IngestConfig())
    assert len(parts) == 1  # small files of every format are read together, in sorted order
    (p,) = parts
    assert (p.format, p.source, p.path, p.key) == ("mixed", ".", str(tree), "00000")
    assert list(p.whole_files()) == [("README", "text"), ("a.jsonl", "jsonl"), ("c.parquet", "parquet"),
                                     ("d.warc", "warc"), ("notes.md", "text"), ("sub/b.jsonl.gz", "jsonl"),
                                     ("sub/e.txt", "text")]  # unknown extensions are text in a directory
    assert p.size == sum(os.path.getsize(tree / f) for f in p.files)
    assert plan([InputConfig(str(tree))], IngestConfig()) == parts  # deterministic


def test_directory_with_explicit_format_keeps_only_that_kind(tree):
    (p,) = plan([InputConfig(str(tree), format="jsonl")], IngestConfig())
    assert (p.format, p.files) == ("jsonl", ("a.jsonl", "sub/b.jsonl.gz"))
    (p,) = plan([InputConfig(str(tree), format="text")], IngestConfig())
    assert p.format == "text" and len(p.files) == 7  # every non-hidden file


def test_single_file_and_glob(tree):
    (p,) = plan([InputConfig(str(tree / "sub" / "b.jsonl.gz"))], IngestConfig())
    assert (p.source, p.path, p.files, p.format) == ("b.jsonl.gz", str(tree / "sub"), ("b.jsonl.gz",), "jsonl")
    (p,) = plan([InputConfig(str(tree / "**" / "*.jsonl*"))], IngestConfig())
    assert p.files == ("a.jsonl", "sub/b.jsonl.gz")


def test_explicit_format_overrides_extension(tmp_path):
    (tmp_path / "data.log").write_bytes(jsonl(3))
    (p,) = plan([InputConfig(str(tmp_path / "data.log"), format="jsonl")], IngestConfig())
    assert p.format == "jsonl"


def test_plain_jsonl_split_into_byte_ranges_compressed_not(tmp_path):
    data = jsonl(1000)
    (tmp_path / "big.jsonl").write_bytes(data)
    (tmp_path / "big.jsonl.gz").write_bytes(gzip.compress(data))
    parts = plan([InputConfig(str(tmp_path))], IngestConfig(partition_bytes=8192))
    plain = [p for p in parts if p.source == "big.jsonl"]
    gz = [p for p in parts if p.source == "big.jsonl.gz"]
    assert len(plain) == -(-len(data) // 8192) > 5
    assert [(p.start, p.end) for p in plain[:2]] == [(0, 8192), (8192, 16384)]
    assert plain[-1].end == -1
    assert sum(p.size for p in plain) == len(data)
    assert len(gz) == 1 and gz[0].size == os.path.getsize(tmp_path / "big.jsonl.gz")


def test_parquet_split_into_row_group_ranges(tmp_path):
    table = pa.table({"text": [os.urandom(500).hex() for _ in range(400)]})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=20, compression="none")  # 20 groups
    parts = plan([InputConfig(str(tmp_path / "t.parquet"))], IngestConfig(partition_bytes=50_000))
    assert len(parts) > 3
    assert parts[0].start == 0 and parts[-1].end == -1
    for a, b in zip(parts, parts[1:]):
        assert a.end == b.start  # contiguous, no group twice
    assert sum(p.size for p in parts) == os.path.getsize(tmp_path / "t.parquet")
    (whole,) = plan([InputConfig(str(tmp_path / "t.parquet"))], IngestConfig())
    assert (whole.start, whole.end) == (0, -1)


def test_corrupt_parquet_is_planned_as_one_partition(tmp_path):
    (tmp_path / "bad.parquet").write_bytes(b"not parquet at all")
    (p,) = plan([InputConfig(str(tmp_path / "bad.parquet"))], IngestConfig())
    assert (p.format, p.start, p.end, p.size) == ("parquet", 0, -1, 18)


def test_whole_files_grouped_under_both_caps(tmp_path):
    for i in range(300):
        (tmp_path / f"{i:03d}.txt").write_text("x" * 100)
    parts = plan([InputConfig(str(tmp_path))], IngestConfig(files_per_partition=40))
    assert [f for p in parts for f in p.files] == sorted(f"{i:03d}.txt" for i in range(300))  # each file once, in order
    assert all(len(p.files) <= 40 for p in parts) and 300 / 40 < len(parts) < 300 / 2
    parts = plan([InputConfig(str(tmp_path))], IngestConfig(partition_bytes=4096))
    assert all(p.size <= 4096 for p in parts) and len(parts) >= 300 * 100 / 4096


def test_group_boundaries_depend_on_each_file_alone(tmp_path):
    """Adding a file changes the group it joins, not the groups after it (content-defined boundaries)."""
    for i in range(0, 2000, 2):
        (tmp_path / f"{i:04d}.jsonl").write_text('{"text": "a"}\n')
    ingest = IngestConfig(files_per_partition=64)
    before = [p.files for p in plan([InputConfig(str(tmp_path))], ingest)]
    (tmp_path / "0501.jsonl").write_text('{"text": "b"}\n')
    after = [p.files for p in plan([InputConfig(str(tmp_path))], ingest)]
    new, gone = [g for g in after if g not in before], [g for g in before if g not in after]
    assert len(gone) == 1 and "0501.jsonl" in new[0] and len(new) <= 2  # the group it joins (cut in two if it ends one)
    assert [f for g in new for f in g] == sorted([*gone[0], "0501.jsonl"])
    assert len(after) > 100  # groups average an eighth of the cap


def test_several_inputs_are_numbered_globally(tmp_path):
    for d in ("x", "y"):
        (tmp_path / d).mkdir()
    (tmp_path / "x" / "a.jsonl").write_bytes(jsonl(2))
    (tmp_path / "y" / "b.jsonl").write_bytes(jsonl(2))
    parts = plan([InputConfig(str(tmp_path / "x")), InputConfig(str(tmp_path / "y"))], IngestConfig())
    assert [(p.index, p.input_index, p.source) for p in parts] == [(0, 0, "a.jsonl"), (1, 1, "b.jsonl")]


def test_nonexistent_path_names_path_input_and_fix(tmp_path):
    missing = str(tmp_path / "nope.jsonl")
    (tmp_path / "ok.jsonl").write_bytes(jsonl(1))
    with pytest.raises(ConfigError) as e:
        plan([InputConfig(str(tmp_path)), InputConfig(missing)], IngestConfig())
    msg = str(e.value)
    assert "inputs[1]" in msg and missing in msg and "does not exist" in msg and "fix the path" in msg


def test_glob_matching_nothing(tmp_path):
    with pytest.raises(ConfigError, match=r"inputs\[0\].path=.*\*\.parquet.* matches no file"):
        plan([InputConfig(str(tmp_path / "*.parquet"))], IngestConfig())


def test_directory_without_files_of_the_format(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(ConfigError, match=r"holds no file to read .*not a parquet file.*set inputs\[0\].format"):
        plan([InputConfig(str(tmp_path), format="parquet")], IngestConfig())
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="directory with no files"):
        plan([InputConfig(str(tmp_path / "empty"))], IngestConfig())


def test_single_file_of_unknown_extension(tmp_path):
    (tmp_path / "data.csv").write_text("a,b")
    with pytest.raises(ConfigError, match=r"cannot tell the format of 'data.csv'.*set inputs\[0\].format"):
        plan([InputConfig(str(tmp_path / "data.csv"))], IngestConfig())


def test_inputs_whose_sources_clash(tmp_path):
    for d in ("x", "y"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "a.jsonl").write_bytes(jsonl(1))
    with pytest.raises(ConfigError, match="both contain a file named 'a.jsonl'.*common parent"):
        plan([InputConfig(str(tmp_path / "x")), InputConfig(str(tmp_path / "y"))], IngestConfig())
    listing = list_inputs([InputConfig(str(tmp_path)), InputConfig(str(tmp_path / "x" / "a.jsonl"))])
    assert [s["reason"] for s in listing.skipped] == ["duplicate of inputs[0] x/a.jsonl (the same file, read once)"]
    assert listing.files[1] == []


def test_partition_is_frozen():
    p = Partition(0, 0, "jsonl", "/a", "a")
    with pytest.raises(AttributeError):
        p.index = 1  # type: ignore[misc]


def test_recursive_glob_lists_each_file_once(tree):
    parts = plan([InputConfig(str(tree / "**"))], IngestConfig())
    assert len(parts) == 1
    assert parts[-1].files == ("README", "a.jsonl", "c.parquet", "d.warc", "notes.md", "sub/b.jsonl.gz", "sub/e.txt")


def test_plain_jsonl_of_tiny_records_is_cut_by_their_estimated_count(tmp_path):
    lines = b"".join(b'{"text": "t %06d"}\n' % i for i in range(100_000))  # 21 bytes a line, 2.1 MB
    (tmp_path / "tiny.jsonl").write_bytes(lines)
    (tmp_path / "tiny.jsonl.gz").write_bytes(gzip.compress(lines))
    parts = plan([InputConfig(str(tmp_path / "tiny.jsonl"))], IngestConfig(partition_docs=30_000))
    assert len(parts) == 4 and all(p.size <= 30_000 * 21 + 200 for p in parts)  # a task holds ~30,000 records, not 100,000
    assert sum(p.size for p in parts) == len(lines)
    (gz,) = plan([InputConfig(str(tmp_path / "tiny.jsonl.gz"))], IngestConfig(partition_docs=30_000))
    assert gz.files == ("tiny.jsonl.gz",)  # a compressed stream cannot be entered in the middle: read whole
