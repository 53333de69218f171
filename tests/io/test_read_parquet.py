"""read_parquet: custom columns, row-group ranges, row-index ids, corrupt files as rejects."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lab.config import IngestConfig, InputConfig
from lab.doc import Doc
from lab.errors import ConfigError
from lab.io.partitions import Partition, plan
from lab.io.readers import Reject, read


def table(n: int) -> pa.Table:
    return pa.table({
        "body": [f"row {i} " + "z" * (i % 300) for i in range(n)],
        "key": [i * 10 for i in range(n)],
        "page": [f"https://p/{i}" for i in range(n)],
    })


def read_all(path, inp, ingest=IngestConfig()):
    parts = plan([inp], ingest)
    return parts, [o for p in parts for o in read(p, inp, ingest)]


def test_custom_columns_multiple_row_groups_and_splitting(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(table(1000), path, row_group_size=50, compression="none")
    inp = InputConfig(str(path), text_field="body", id_field="key", url_field="page")
    whole_parts, whole = read_all(path, inp)
    parts, split = read_all(path, inp, IngestConfig(partition_bytes=20_000))
    assert len(whole_parts) == 1 and len(parts) > 4
    assert all(isinstance(d, Doc) for d in whole) and len(whole) == 1000
    assert [d.locator for d in whole] == list(range(1000))  # row index within the file
    d = whole[123]
    assert (d.text, d.record_id, d.url, d.source) == ("row 123 " + "z" * 123, "1230", "https://p/123", "t.parquet")
    assert d.raw_bytes == len(d.text.encode())
    assert [(d.doc_id, d.text) for d in split] == [(d.doc_id, d.text) for d in whole]  # ids ignore partitioning


def test_id_and_url_columns_are_optional(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"text": ["a", "", None]}), path)
    _, out = read_all(path, InputConfig(str(path)))
    a, empty, null = out
    assert (a.text, a.record_id, a.url) == ("a", "", "")
    assert isinstance(empty, Doc) and empty.text == ""
    assert isinstance(null, Reject) and null.locator == 2 and "'text' is null" in null.reason


def test_missing_text_column_is_a_config_error_before_any_work(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(table(5), path)
    with pytest.raises(ConfigError) as e:
        plan([InputConfig(str(path))], IngestConfig())
    assert "inputs[0].text_field='text'" in str(e.value) and "columns are body, key, page" in str(e.value)
    # the reader still rejects such a partition (with the columns listed) if it is given one
    p = Partition(0, 0, "parquet", str(path), "t.parquet", size=os.path.getsize(path))
    (r,) = read(p, InputConfig(str(path)), IngestConfig())
    assert isinstance(r, Reject) and "no column 'text'; columns present: body, key, page" in r.reason


def test_non_string_text_column_is_one_reject_per_row(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"text": [1, 2, None], "body": ["a", "b", "c"]}), path)
    out = read_all(path, InputConfig(str(path)))[1]
    assert [(r.locator, r.raw_bytes) for r in out] == [(0, 8), (1, 8), (2, 0)]
    assert all(isinstance(r, Reject) for r in out)
    assert out[1].reason == ("t.parquet row 1: 'text' is a int64 value (2), not a string; set inputs[0].text_field "
                             "to the column that holds the text (string columns: body)")


def test_html_bytes_with_html_true_are_decoded_as_web_pages(tmp_path):
    page = '<html><head><meta charset="shift_jis"></head><body><p>日本語のページです。</p></body></html>'
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"text": pa.array([page.encode("shift_jis")], pa.binary())}), path)
    (d,) = read_all(path, InputConfig(str(path), html=True))[1]
    assert (d.encoding, d.encoding_source, d.decode_errors) == ("cp932", "meta", 0) and "日本語" in d.text
    (d,) = read_all(path, InputConfig(str(path)))[1]  # without html: true bytes are UTF-8
    assert d.decode_errors > 0


def test_corrupt_parquet_files_are_rejects_not_exceptions(tmp_path):
    good = tmp_path / "good.parquet"
    pq.write_table(table(200), good, row_group_size=50)
    blob = good.read_bytes()
    cases = {
        "magic.parquet": b"XXXX" + blob[4:-4] + b"XXXX",
        "truncated.parquet": blob[: len(blob) // 2],
        "empty.parquet": b"",
        "text.parquet": b"hello, I am not parquet\n" * 10,
    }
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        inp = InputConfig(str(path), text_field="body")
        parts, out = read_all(path, inp)
        assert len(parts) == 1 and len(out) == 1, name
        (r,) = out
        assert isinstance(r, Reject) and r.source == name
        assert "not a readable Parquet file" in r.reason and "re-create" in r.reason
        assert r.raw_bytes == len(data)


def test_corrupt_row_group_keeps_the_groups_before(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(table(200), path, row_group_size=50, compression="none")
    meta = pq.ParquetFile(path).metadata
    rg2 = meta.row_group(2).column(0)
    start = rg2.data_page_offset
    blob = bytearray(path.read_bytes())
    blob[start:start + 200] = b"\xff" * 200  # smash the page header and data of group 2
    path.write_bytes(bytes(blob))
    _, out = read_all(path, InputConfig(str(path), text_field="body"))
    docs = [o for o in out if isinstance(o, Doc)]
    assert [d.locator for d in docs][:100] == list(range(100))
    assert isinstance(out[-1], Reject) and "row group 2 (rows from 100)" in out[-1].reason
    assert out[-1].locator == 100


def test_malformed_utf8_and_giant_rows(tmp_path):
    path = tmp_path / "t.parquet"
    texts = pa.array([b"ok", b"bad \xff\xfe end", b"g" * 5000], type=pa.binary()).view(pa.string())
    pq.write_table(pa.table({"text": texts}), path)
    ingest = IngestConfig(max_doc_bytes=1000)
    _, out = read_all(path, InputConfig(str(path)), ingest)
    ok, bad, giant = out
    assert ok.decode_errors == 0
    assert bad.text == "bad \ufffd end" and bad.decode_errors == 2 and bad.raw_bytes == 10
    assert isinstance(giant, Reject) and giant.locator == 2 and giant.raw_bytes == 5000
    assert "document of 5000 bytes exceeds ingest.max_doc_bytes=1000" in giant.reason


def test_dictionary_encoded_text_column(tmp_path):
    path = tmp_path / "t.parquet"
    col = pa.array(["a", "b", "a"]).dictionary_encode()
    pq.write_table(pa.table({"text": col}), path)
    out = read_all(path, InputConfig(str(path)))[1]
    assert [d.text for d in out] == ["a", "b", "a"]


def test_a_row_group_of_more_rows_than_partition_docs_is_cut_inside(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(230)]}), path, row_group_size=100)  # 100, 100, 30
    inp = InputConfig(str(path))
    ingest = IngestConfig(partition_docs=60)
    parts = plan([inp], ingest)
    assert [(p.start, p.end) for p in parts] == [(0, 60), (60, 120), (120, 180), (180, -1)]
    assert sum(p.size for p in parts) == os.path.getsize(path)
    out = [o for p in parts for o in read(p, inp, ingest)]
    assert [(d.locator, d.text) for d in out] == [(i, f"row {i}") for i in range(230)]  # each row once, in order
