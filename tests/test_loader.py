"""TokenLoader: exactly-once delivery over every (rank, worker) stream, resume, order, refusals.

The test split holds 37 sequences of 16 tokens in 4 shards of 10, 3, 17 and 7 sequences, and
every token's value is its global position (sequence index * 16 + column), so a delivered
token says where it came from. 37 is prime: no W > 1 divides it.
"""

import itertools
import json
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from lab.errors import ConfigError, IntegrityError, NotReadyError
from lab.tokens.shards import SplitManifest, write_manifest, write_shard
from lab.tokens.loader import FeistelOrder, TokenLoader, stream_length, stream_order, torch_dataset, verify

SEQ_LEN = 16
COUNTS = (10, 3, 17, 7)  # 37 sequences
N = sum(COUNTS)
ROOT = Path(__file__).resolve().parent.parent


def cu_of(index: int) -> np.ndarray:
    """Each sequence's own boundaries, so a wrong row shows in cu_seqlens too."""
    return np.array([0, index % (SEQ_LEN - 1) + 1, SEQ_LEN], dtype=np.int32)


def make_split(directory: Path, counts=COUNTS, dtype=np.uint32, config_hash="cfg-1") -> Path:
    shards, start = [], 0
    for k, c in enumerate(counts):
        tokens = np.arange(start * SEQ_LEN, (start + c) * SEQ_LEN, dtype=np.int64).reshape(c, SEQ_LEN)
        shards.append(write_shard(directory, k, tokens, [cu_of(start + i) for i in range(c)], np.dtype(dtype)))
        start += c
    write_manifest(directory, SplitManifest(split="train", dtype=np.dtype(dtype).name, seq_len=SEQ_LEN, eod_id=0,
                                            pad_id=0, vocab_size=1 << 20, tokenizer_sha256="ab" * 32,
                                            config_hash=config_hash, shuffle_seed=0, packing="best_fit",
                                            shards=shards))
    return directory


@pytest.fixture
def split(tmp_path) -> Path:
    return make_split(tmp_path / "train")


def stream_kw(world, workers, rank, worker, seed=0, epoch=0):
    return {"rank": rank, "world_size": world, "worker_id": worker, "num_workers": workers, "seed": seed,
            "epoch": epoch}


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.parametrize("workers", [1, 3])
def test_exactly_once_with_mid_epoch_resume(split, world, workers):
    report = verify(split, world_size=world, num_workers=workers, seed=3, save_at=0.5)
    assert report["ok"], report
    assert report["tokens"] == report["delivered"] == N * SEQ_LEN == 592
    assert report["duplicates"] == report["missing"] == report["mismatched"] == 0
    assert report["streams"] == world * workers
    assert report["stream_lengths"]["max"] - report["stream_lengths"]["min"] <= 1

    # independently: save a third of the way in, restore into a new loader, collect token VALUES
    values = []
    for rank, worker in itertools.product(range(world), range(workers)):
        kw = stream_kw(world, workers, rank, worker, seed=3)
        first = TokenLoader(split, **kw)
        for s in itertools.islice(iter(first), len(first) // 3):
            values.append(s.tokens.copy())
        second = TokenLoader(split, **kw)
        second.load_state_dict(json.loads(json.dumps(first.state_dict())))
        for s in second:
            assert np.array_equal(s.cu_seqlens, cu_of(s.index))
            assert s.tokens[0] == s.index * SEQ_LEN
            values.append(s.tokens.copy())
    assert np.array_equal(np.sort(np.concatenate(values)), np.arange(N * SEQ_LEN))


@pytest.mark.parametrize("save_at", [0.0, 1.0])
def test_verify_saving_at_the_ends(split, save_at):
    assert verify(split, world_size=2, num_workers=3, save_at=save_at)["ok"]


def test_order_is_the_documented_permutation(split):
    # contract: stream g takes epoch positions g, g + W, ... of FeistelOrder(N, seed, epoch)
    perm = np.array(FeistelOrder(N, seed=5, epoch=2)[:])
    assert sorted(perm.tolist()) == list(range(N))
    for rank, worker in itertools.product(range(2), range(3)):
        got = [s.index for s in TokenLoader(split, **stream_kw(2, 3, rank, worker, seed=5, epoch=2))]
        assert got == perm[rank * 3 + worker::6].tolist()


def test_order_per_epoch_and_seed(split):
    def order(**kw):
        return [s.index for s in TokenLoader(split, **kw)]

    e0, e1 = order(seed=1, epoch=0), order(seed=1, epoch=1)
    assert sorted(e0) == sorted(e1) == list(range(N))
    assert e0 != e1
    assert order(seed=1, epoch=0) == e0  # same (seed, epoch), same order
    assert order(seed=2, epoch=0) != e0
    loader = TokenLoader(split, seed=1)
    assert [s.index for s in loader] == e0
    assert list(loader) == []  # the epoch ended: iteration stops
    loader.set_epoch(1)
    assert [(s.index, s.epoch) for s in loader] == [(i, 1) for i in e1]


def test_stream_lengths_differ_by_at_most_one(split):
    for world, workers in [(1, 1), (2, 1), (4, 3), (5, 2), (37, 1), (20, 2)]:
        lengths = [len(list(TokenLoader(split, **stream_kw(world, workers, r, w))))
                   for r, w in itertools.product(range(world), range(workers))]
        assert sum(lengths) == N and max(lengths) - min(lengths) <= 1
        assert lengths == [stream_length(N, g, world * workers) for g in range(world * workers)]
    # more streams than sequences: the last ones are empty, nothing is repeated
    assert [len(TokenLoader(split, world_size=40, rank=r)) for r in (36, 37, 39)] == [1, 0, 0]


def test_resume_at_epoch_end_and_across_epochs(split):
    a = TokenLoader(split, world_size=2, rank=1)
    seen = [s.index for s in a]
    b = TokenLoader(split, world_size=2, rank=1)
    b.load_state_dict(a.state_dict())
    assert list(b) == []  # the saved stream had finished its epoch
    a.set_epoch(1)
    next(iter(a))
    c = TokenLoader(split, world_size=2, rank=1)  # built for epoch 0; the state carries epoch 1
    c.load_state_dict(a.state_dict())
    assert c.epoch == 1 and c.position == 1
    assert [s.index for s in c] == stream_indices(split, 1)[1:] != seen[1:]


def stream_indices(split, epoch):
    return [s.index for s in TokenLoader(split, world_size=2, rank=1, epoch=epoch)]


def test_samples_are_read_only_views(split):
    s = next(iter(TokenLoader(split)))
    assert s.tokens.dtype == np.uint32 and s.tokens.shape == (SEQ_LEN,)
    assert not s.tokens.flags.owndata and not s.tokens.flags.writeable


def test_uint16_split(tmp_path):
    split = make_split(tmp_path / "u16", counts=(4, 5), dtype=np.uint16)
    report = verify(split, world_size=2, num_workers=2)
    assert report["ok"] and report["tokens"] == 9 * SEQ_LEN
    assert next(iter(TokenLoader(split))).tokens.dtype == np.uint16


def test_restoring_into_another_layout_seed_or_split_is_refused(split, tmp_path):
    a = TokenLoader(split, world_size=2, rank=0, seed=0)
    next(iter(a))
    state = a.state_dict()
    with pytest.raises(ConfigError, match=r"world_size=2 \(this loader: 4\)"):
        TokenLoader(split, world_size=4, rank=0).load_state_dict(state)
    with pytest.raises(ConfigError, match=r"rank=0 \(this loader: 1\)"):
        TokenLoader(split, world_size=2, rank=1).load_state_dict(state)
    with pytest.raises(ConfigError, match=r"num_workers=1 \(this loader: 3\)"):
        TokenLoader(split, world_size=2, num_workers=3).load_state_dict(state)
    with pytest.raises(ConfigError, match=r"seed=0 \(this loader: 9\)"):
        TokenLoader(split, world_size=2, seed=9).load_state_dict(state)
    other = make_split(tmp_path / "other", config_hash="cfg-2")
    with pytest.raises(ConfigError, match="another split.*config_hash: 'cfg-1' != 'cfg-2'"):
        TokenLoader(other, world_size=2).load_state_dict(state)
    fewer = make_split(tmp_path / "fewer", counts=(10, 3, 17))
    with pytest.raises(ConfigError, match="sequences: 37 != 30"):
        TokenLoader(fewer, world_size=2).load_state_dict(state)
    with pytest.raises(IntegrityError, match="order differs"):
        TokenLoader(split, world_size=2).load_state_dict({**state, "order_digest": "0" * 32})
    with pytest.raises(ConfigError, match="position=99 is out of range"):
        TokenLoader(split, world_size=2).load_state_dict({**state, "position": 99})
    with pytest.raises(ConfigError, match="not a TokenLoader state"):
        TokenLoader(split).load_state_dict({"position": 3})


@pytest.mark.parametrize("kw, message", [
    ({"rank": 2, "world_size": 2}, r"rank=2 is out of range for world_size=2: allowed 0 <= rank < 2"),
    ({"rank": -1}, r"rank=-1 is out of range for world_size=1"),
    ({"worker_id": 3, "num_workers": 3}, r"worker_id=3 is out of range for num_workers=3: allowed 0 <= worker_id < 3"),
    ({"world_size": 0}, r"world_size=0: must be an int >= 1"),
    ({"num_workers": 1.5}, r"num_workers=1.5: must be an int >= 1"),
    ({"seed": -1}, r"seed=-1: must be an int >= 0"),
    ({"epoch": -2}, r"epoch=-2: must be an int >= 0"),
])
def test_arguments_are_validated(split, kw, message):
    with pytest.raises(ConfigError, match=message):
        TokenLoader(split, **kw)


def test_truncated_shard_is_refused(split):
    path = split / "shard-00002.bin"
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(IntegrityError, match="truncated"):
        TokenLoader(split)


def test_missing_manifest_is_refused(tmp_path):
    with pytest.raises(NotReadyError, match="manifest.json is missing"):
        TokenLoader(tmp_path)


def test_torch_is_not_imported_by_the_module():
    code = "import sys, lab.tokens.loader; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_torch_wrapper_without_torch_says_how_to_install(split):
    # torch is a test dependency: hide it from a fresh interpreter (a None entry makes its import fail)
    code = ("import sys; sys.modules['torch'] = None\n"
            "from lab.errors import ConfigError\nfrom lab.tokens.loader import torch_dataset\n"
            f"try:\n    torch_dataset({str(split)!r})\nexcept ConfigError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    assert "pip install torch" in out


@pytest.mark.parametrize("workers", [0, 2])
def test_torch_dataset_delivers_every_sequence_once_through_a_dataloader(split, workers):
    import torch
    from torch.utils.data import DataLoader

    got = list(DataLoader(torch_dataset(split, seed=3), batch_size=None, num_workers=workers))
    assert sorted(s["index"] for s in got) == list(range(N))
    for s in got:  # every token's value is its global position
        assert (s["tokens"].dtype, s["cu_seqlens"].dtype) == (torch.int64, torch.int32)
        assert s["tokens"].tolist() == list(range(s["index"] * SEQ_LEN, (s["index"] + 1) * SEQ_LEN))
        assert s["cu_seqlens"].tolist() == cu_of(s["index"]).tolist()
    assert {s["worker_id"] for s in got} == set(range(max(workers, 1)))


@pytest.mark.filterwarnings("ignore:This DataLoader will create 3 worker processes")  # 2-core CI machines
def test_torch_dataloader_with_three_workers_at_two_ranks_delivers_every_token_once(split):
    import torch
    from torch.utils.data import DataLoader

    tokens, per_rank = [], []
    for rank in range(2):  # each rank's DataLoader in turn, as two DDP processes would run them
        got = list(DataLoader(torch_dataset(split, rank=rank, world_size=2, seed=3), batch_size=None, num_workers=3))
        assert {s["worker_id"] for s in got} == {0, 1, 2}
        per_rank.append(sorted(s["index"] for s in got))
        tokens += [s["tokens"] for s in got]
    assert sorted(per_rank[0] + per_rank[1]) == list(range(N))
    assert sorted(map(len, per_rank)) == [18, 19]
    assert torch.equal(torch.sort(torch.cat(tokens)).values, torch.arange(N * SEQ_LEN))


# --- the order: a seeded bijection computed on the fly ----------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1000, 4095, 4097])
def test_feistel_order_is_a_permutation(n):
    for seed, epoch in [(0, 0), (7, 0), (7, 1)]:
        order = FeistelOrder(n, seed=seed, epoch=epoch)
        got = order.take(np.arange(n))
        assert got.dtype == np.int64 and np.array_equal(np.sort(got), np.arange(n))
        assert np.array_equal(FeistelOrder(n, seed=seed, epoch=epoch).take(np.arange(n)), got)  # deterministic
        # the streams of a layout partition the epoch, in position order
        parts = [stream_order(n, seed=seed, epoch=epoch, stream=g, streams=3) for g in range(3)]
        assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(n))
        assert np.array_equal(parts[1], got[1::3])


def test_feistel_order_differs_across_epochs_and_seeds():
    base = FeistelOrder(1000, seed=1, epoch=0)[:]
    assert FeistelOrder(1000, seed=1, epoch=1)[:] != base
    assert FeistelOrder(1000, seed=2, epoch=0)[:] != base
    assert base != list(range(1000))  # it shuffles
    # not a near-identity: few fixed points and a position-index correlation near 0
    assert sum(i == p for p, i in enumerate(base)) < 10
    assert abs(np.corrcoef(np.arange(1000), base)[0, 1]) < 0.15


def test_order_memory_does_not_grow_with_n():
    def peak_taking(n, count=100_000):
        tracemalloc.start()
        taken = 0
        blocks = FeistelOrder(n, seed=3, epoch=1).stream_blocks(2, 3)
        seen = set()
        for block in blocks:
            seen.update(block[:50].tolist())  # a sample, kept small
            assert block.min() >= 0 and block.max() < n
            taken += block.size
            if taken >= count:
                break
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return peak, taken, seen

    peak_small, taken, _ = peak_taking(10**6)
    peak_huge, taken_huge, seen = peak_taking(10**9)
    assert taken == taken_huge >= 100_000
    assert len(seen) == 25 * 50  # distinct indices
    # a permutation array would be 8 MB at 10**6 and 8 GB at 10**9; the order takes blocks of 4096
    assert peak_small < 2_000_000 and peak_huge < 2_000_000, (peak_small, peak_huge)
    assert FeistelOrder(10**9, seed=0, epoch=0)[10**9 - 1] < 10**9


def test_a_version_1_state_is_refused_with_the_reason(split):
    state = TokenLoader(split).state_dict()
    with pytest.raises(ConfigError, match="state version 1 .*numpy's Generator.permutation.*start the epoch fresh"):
        TokenLoader(split).load_state_dict({**state, "version": 1})
    with pytest.raises(IntegrityError, match="order differs"):
        TokenLoader(split).load_state_dict({**state, "order": "numpy-permutation"})


# --- prefetch and telemetry -------------------------------------------------------------------------

@pytest.mark.parametrize("world, workers", [(1, 1), (2, 3), (4, 1)])
def test_exactly_once_with_prefetch_and_resume(split, world, workers):
    assert verify(split, world_size=world, num_workers=workers, seed=3, save_at=0.4, prefetch=4)["ok"]


def test_state_counts_what_was_handed_out_not_what_was_prefetched(split):
    a = TokenLoader(split, prefetch=16)
    it = iter(a)
    first = [next(it).index for _ in range(5)]
    time.sleep(0.05)  # the thread has read ahead by now
    state = a.state_dict()
    assert state["position"] == 5
    b = TokenLoader(split)
    b.load_state_dict(state)
    assert first + [s.index for s in b] == [s.index for s in TokenLoader(split)]
    del it
    s = next(iter(TokenLoader(split, prefetch=2)))
    assert s.tokens.flags.owndata and not s.tokens.flags.writeable  # prefetched: a read-only copy


def slow_storage(delay_s):
    """A read_row hook: every row read waits ``delay_s`` (storage latency), then returns the view."""
    def read(shard, row, view):
        time.sleep(delay_s)
        return view
    return read


def test_slow_storage_shows_as_stalls_and_prefetch_hides_it(split, tmp_path):
    slow = TokenLoader(split, read_row=slow_storage(0.004), stall_ms=2)
    assert len(list(slow)) == N
    t = slow.telemetry()
    assert t["steps"] == N and t["stalls"] == N  # every step waited for the storage
    assert t["p50_ms"] >= 4 and t["max_ms"] >= t["p99_ms"] >= t["p50_ms"]

    fast = TokenLoader(split, read_row=slow_storage(0.004), stall_ms=2, prefetch=8)
    for s in fast:
        time.sleep(0.008)  # the trainer's step: longer than a read, so the thread keeps ahead
        assert s.tokens[0] == s.index * SEQ_LEN
    f = fast.telemetry()
    assert f["steps"] == N and f["stalls"] <= 5 and f["p50_ms"] < 1, f  # the first reads only

    paths = fast.write_telemetry(tmp_path / "telemetry" / "rank0")
    table = pq.read_table(paths["table"]).to_pydict()
    assert table["step"] == list(range(N)) and sum(table["stall"]) == f["stalls"]
    assert json.loads(paths["summary"].read_text())["stalls"] == f["stalls"]
    assert abs(np.percentile(table["wait_ms"], 50) - f["p50_ms"]) < 1e-3


def test_a_read_error_reaches_the_caller_and_the_thread_ends(split):
    def broken(shard, row, view):
        if shard == 2:
            raise OSError(f"EIO reading shard {shard}")
        return view

    loader = TokenLoader(split, read_row=broken, prefetch=4)
    with pytest.raises(OSError, match="EIO reading shard 2"):
        list(loader)
    time.sleep(0.2)
    assert not [t for t in threading.enumerate() if t.name.startswith("TokenLoader-prefetch")]


@pytest.mark.parametrize("kw, message", [
    ({"prefetch": -1}, r"prefetch=-1: must be an int >= 0"),
    ({"stall_ms": 0}, r"stall_ms=0: must be a number of milliseconds > 0"),
    ({"read_row": "slow"}, r"read_row='slow': must be a function"),
])
def test_prefetch_arguments_are_validated(split, kw, message):
    with pytest.raises(ConfigError, match=message):
        TokenLoader(split, **kw)


def test_the_order_is_pinned():
    # a saved state resumes only under the same order: a change to FeistelOrder must change ORDER
    # (and STATE_VERSION), and this test says so
    assert FeistelOrder(10, seed=0, epoch=0)[:] == ORDER_10
    assert FeistelOrder(10**9, seed=0, epoch=0)[:8] == ORDER_1E9_FIRST


ORDER_10 = [6, 7, 2, 5, 0, 1, 4, 3, 8, 9]
ORDER_1E9_FIRST = [143059860, 34979169, 876596115, 307767973, 756113962, 254213893, 990951650, 740783845]


def test_read_tokens_records_telemetry_the_dashboard_plots(tokens_run, tmp_path, corpus_lab):
    """``corpus-lab read-tokens``: the loader's waits per step under a trainer's pace, written to the run's
    telemetry/ (the summary equals the table), listed by lab.query and drawn on the Fertility & packing tab."""
    import shutil

    from apps.dispatch import Dispatch
    from apps.store import Selection
    from apps.views.tokens import TokensTab
    from lab import query

    run = tmp_path / "run"
    shutil.copytree(tokens_run.run_dir, run)
    r = corpus_lab("read-tokens", str(run), "--steps", "40", "--step-ms", "0.5", "--prefetch", "4", "--name", "t")
    assert r.returncode == 0, r.stderr
    assert "40 steps" in r.stdout and "stalls over 1 ms" in r.stdout
    summary = query.loader_telemetry(run).row(0, named=True)
    steps = query.telemetry_steps(run, "t")
    assert summary["name"] == "t" and summary["steps"] == steps.height == 40 and summary["prefetch"] == 4
    assert summary["stalls"] == int(steps["stall"].sum()) and summary["max_ms"] == pytest.approx(steps["wait_ms"].max(),
                                                                                                 abs=1e-3)
    tab = TokensTab(Selection(run), Dispatch(None))
    titles = [getattr(o, "object", None) for o in tab.tables.objects]
    assert any("Loader telemetry" in str(t) for t in titles)
    figs = [o.object for o in tab.figures.objects if hasattr(o.object, "axes")]
    assert any("loader: t" in f.axes[0].get_title() for f in figs)
