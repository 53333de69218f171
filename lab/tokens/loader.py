"""loader: a deterministic, resumable, exactly-once reader of one token split (``tokens/train``).

The unit is a *sequence*: one row of a shard (``lab.tokens.shards``), numbered globally in shard order,
then row order, ``N`` in all. **Order**: each epoch is a seeded bijection of ``0 .. N - 1`` computed on
the fly (``FeistelOrder``), the same on every rank and worker, in O(1) memory at any N. **Streams**:
``W = world_size * num_workers``; stream ``g = rank * num_workers + worker_id`` takes positions ``g, g + W,
...``. **Tail**: nothing dropped or repeated; stream lengths differ by at most one (``stream_length``).
**Resume**: ``state_dict`` saves the position, epoch, seed, stream layout and the split's identity;
``load_state_dict`` refuses another. **Reading**: shards are memory-mapped once, a sequence is a read-only
view; ``prefetch=k`` reads ahead on a thread; ``telemetry()`` reports the caller's waits. ``verify``
simulates a whole job; ``torch_dataset`` wraps the loader for PyTorch. No shuffling within a sequence.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lab.errors import ConfigError, IntegrityError
from lab.hashing import splitmix64, splitmix64_array
from lab.tokens.shards import Shard, SplitManifest, open_shard, read_manifest

STATE_VERSION = 2  # 1: numpy Generator.permutation order; 2: FeistelOrder
ORDER = "feistel4-ff1split-splitmix64"  # the order function a version-2 state was saved under
LAYOUT_KEYS = ("rank", "world_size", "worker_id", "num_workers", "seed")
BLOCK = 4096  # stream positions turned into sequence indices at a time
ROUNDS = 4  # Feistel rounds (4 balanced rounds: a strong pseudo-random permutation, Luby-Rackoff)
PREFETCH_CHUNK = 32  # most sequences the prefetch thread hands over at once
TELEMETRY_WINDOW = 1 << 16  # per-step waits kept for the percentiles and the table (the last ones)

class FeistelOrder:
    """A seeded bijection of ``0 .. sequences - 1`` for one (seed, epoch), computed on the fly.

    ``take(positions)`` gives the sequence at each epoch position; memory is that of the
    arguments, whatever ``sequences`` is (see the module docstring).

    >>> order = FeistelOrder(10, seed=0, epoch=0)
    >>> sorted(order.take(np.arange(10)).tolist()) == list(range(10))
    True
    >>> order[3] == int(order.take(np.array([3]))[0]), FeistelOrder(10, seed=0, epoch=1)[:] != order[:]
    (True, True)
    """

    def __init__(self, sequences: int, *, seed: int, epoch: int) -> None:
        self.sequences = _check_nonneg("sequences", sequences)
        self.seed, self.epoch = _check_nonneg("seed", seed), _check_nonneg("epoch", epoch)
        self.bits = max(2, (self.sequences - 1).bit_length())  # domain 2**bits >= sequences, >= 4
        u = self.bits // 2  # the halves: u high bits and v = bits - u low bits
        self._v = np.uint64(self.bits - u)
        self._masks = (np.uint64((1 << u) - 1), np.uint64((1 << (self.bits - u)) - 1))
        base = splitmix64(splitmix64(self.seed ^ 0x6C6F61646572) ^ self.epoch)  # "loader"
        self._keys = [np.uint64(splitmix64(base + r + 1)) for r in range(ROUNDS)]

    def __len__(self) -> int:
        return self.sequences

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        """One pass of the network over ``2**bits`` (FF1's alternating split, NIST SP 800-38G)."""
        a, b = x >> self._v, x & self._masks[1]  # a: u bits, b: v bits
        for r, key in enumerate(self._keys):
            f = splitmix64_array(b ^ key)
            f &= self._masks[r % 2]  # a has u bits in even rounds, v bits in odd ones
            a ^= f
            a, b = b, a
        a <<= self._v  # an even number of rounds: a has u bits, b has v bits again
        a |= b
        return a

    def take(self, positions: np.ndarray) -> np.ndarray:
        """Sequence index (int64) at each of ``positions`` (ints in ``0 .. sequences - 1``)."""
        x = self._encrypt(np.asarray(positions, dtype=np.uint64))
        n = np.uint64(self.sequences)
        walk = np.flatnonzero(x >= n)
        while walk.size:  # cycle walking: the domain is < 2N, so < 2 encryptions per index on average
            y = self._encrypt(x[walk])
            x[walk] = y
            walk = walk[y >= n]
        return x.astype(np.int64)

    def __getitem__(self, key):
        if isinstance(key, slice):
            return self.take(np.arange(*key.indices(self.sequences), dtype=np.int64)).tolist()
        p = _check_index("position", key, "sequences", self.sequences)
        return int(self.take(np.array([p]))[0])

    def stream_blocks(self, stream: int, streams: int, start: int = 0, block: int = BLOCK) -> Iterator[np.ndarray]:
        """Indices of stream ``stream`` of ``streams`` (epoch positions ``stream, stream + streams,
        ...``) from its ``start``-th on, ``block`` at a time."""
        length = stream_length(self.sequences, stream, streams)
        for i in range(start, length, block):
            yield self.take(stream + streams * np.arange(i, min(i + block, length), dtype=np.int64))


@dataclass(slots=True)
class Sample:
    """One delivered sequence: ``tokens`` [seq_len] (a read-only view of the shard, or a read-only
    copy when prefetched), its ``cu_seqlens`` (document boundaries, ``lab.tokens.shards``), its global
    ``index``, the ``epoch`` and its ``position`` in this stream (0-based: after it, the stream has
    yielded position + 1)."""

    tokens: np.ndarray
    cu_seqlens: np.ndarray
    index: int
    epoch: int
    position: int


def stream_length(sequences: int, stream: int, streams: int) -> int:
    """Sequences stream ``stream`` of ``streams`` gets from an epoch of ``sequences``.

    >>> [stream_length(37, g, 8) for g in range(8)]
    [5, 5, 5, 5, 5, 4, 4, 4]
    """
    return sequences // streams + (stream < sequences % streams)


def stream_order(sequences: int, *, seed: int, epoch: int, stream: int, streams: int) -> np.ndarray:
    """Global sequence indices of one stream for one epoch, in delivery order (all at once: for
    tests and small splits; the loader itself reads ``FeistelOrder.stream_blocks``).

    >>> a = stream_order(10, seed=0, epoch=0, stream=0, streams=2)
    >>> b = stream_order(10, seed=0, epoch=0, stream=1, streams=2)
    >>> sorted(np.concatenate([a, b]).tolist()) == list(range(10))
    True
    """
    blocks = list(FeistelOrder(sequences, seed=seed, epoch=epoch).stream_blocks(stream, streams))
    return np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int64)


def split_identity(manifest: SplitManifest) -> dict[str, Any]:
    """What a saved state must match: the tokenizer, the run config and the exact shard table."""
    table = json.dumps([(s.name, s.sequences, s.real_tokens) for s in manifest.shards]).encode()
    return {"tokenizer_sha256": manifest.tokenizer_sha256, "config_hash": manifest.config_hash,
            "sequences": manifest.sequences, "seq_len": manifest.seq_len, "dtype": manifest.dtype,
            "shards_sha256": hashlib.sha256(table).hexdigest()}


def _check_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{name}={value!r}: must be an int >= 1")
    return int(value)


def _check_index(name: str, value: Any, bound_name: str, bound: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < bound:
        raise ConfigError(f"{name}={value!r} is out of range for {bound_name}={bound}: "
                          f"allowed 0 <= {name} < {bound}")
    return int(value)


def _check_nonneg(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ConfigError(f"{name}={value!r}: must be an int >= 0")
    return int(value)


def _check_ms(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"{name}={value!r}: must be a number of milliseconds > 0")
    return float(value)


class _Stop:
    """End of the prefetch thread's stream (``error`` set when reading failed)."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


class TokenLoader:
    """Iterate one stream of one split for one epoch; see the module docstring for the order,
    the tail policy, resuming, prefetch and telemetry.

    ``prefetch``: sequences read ahead on a background thread (0: none, rows are zero-copy views
    read by the caller). ``stall_ms``: a step whose wait exceeds it counts as a stall.
    ``read_row``: ``(shard, row, view) -> tokens``, how each row is read (default: the
    memory-mapped view itself; with prefetch, a copy of it).

    >>> loader = TokenLoader("runs/x/tokens/train", rank=0, world_size=2, seed=0)  # doctest: +SKIP
    >>> for s in loader:  # doctest: +SKIP
    ...     s.tokens, s.cu_seqlens, s.index, s.epoch
    """

    def __init__(self, split_dir: str | Path, *, rank: int = 0, world_size: int = 1, worker_id: int = 0,
                 num_workers: int = 1, seed: int = 0, epoch: int = 0, prefetch: int = 0, stall_ms: float = 1.0,
                 read_row: Callable[[int, int, np.ndarray], np.ndarray] | None = None) -> None:
        self.world_size = _check_count("world_size", world_size)
        self.num_workers = _check_count("num_workers", num_workers)
        self.rank = _check_index("rank", rank, "world_size", self.world_size)
        self.worker_id = _check_index("worker_id", worker_id, "num_workers", self.num_workers)
        self.seed = _check_nonneg("seed", seed)
        self.prefetch = _check_nonneg("prefetch", prefetch)
        self.stall_ms = _check_ms("stall_ms", stall_ms)
        if read_row is not None and not callable(read_row):
            raise ConfigError(f"read_row={read_row!r}: must be a function (shard, row, view) -> tokens, or None")
        self.read_row = read_row
        self.split_dir = Path(split_dir)
        self.manifest = read_manifest(self.split_dir)
        self.identity = split_identity(self.manifest)
        self.streams = self.world_size * self.num_workers
        self.stream = self.rank * self.num_workers + self.worker_id
        counts = np.array([s.sequences for s in self.manifest.shards], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(counts)])  # shard k holds [starts[k], starts[k + 1])
        self._shards: list[Shard | None] = [self._open(info) for info in self.manifest.shards]
        self.epoch = 0
        self.position = 0  # sequences this stream has handed to the caller in the current epoch
        self.order: FeistelOrder | None = None
        self.reset_telemetry()
        self.set_epoch(epoch)

    def _open(self, info) -> Shard | None:
        if info.sequences == 0:
            return None  # nothing to read (and an empty file cannot be memory-mapped)
        shard = open_shard(self.split_dir, info, self.manifest)  # checked against the manifest
        # a plain ndarray view of the memmap: row slicing skips np.memmap's per-slice bookkeeping
        return Shard(shard.tokens.view(np.ndarray), shard.bounds, shard.offsets)

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from its beginning (position 0)."""
        self.epoch = _check_nonneg("epoch", epoch)
        self.position = 0
        self.order = FeistelOrder(self.manifest.sequences, seed=self.seed, epoch=self.epoch)

    def __len__(self) -> int:
        """Sequences of this stream in one epoch (not the remaining ones)."""
        return stream_length(self.manifest.sequences, self.stream, self.streams)

    def _rows(self, start: int) -> Iterator[tuple[int, int, int]]:
        """(global index, shard, row) of this stream's sequences from position ``start`` on."""
        for index in self.order.stream_blocks(self.stream, self.streams, start):
            shard = np.searchsorted(self._starts, index, side="right") - 1
            yield from zip(index.tolist(), shard.tolist(), (index - self._starts[shard]).tolist())

    def _samples(self, start: int, copy: bool) -> Iterator[Sample]:
        """This stream's samples from position ``start`` on, read through ``read_row``."""
        shards, epoch, read = self._shards, self.epoch, self.read_row
        for p, (i, k, r) in enumerate(self._rows(start), start):
            s = shards[k]
            tokens = s.tokens[r] if read is None else read(k, r, s.tokens[r])
            if copy and tokens.base is not None:
                tokens = tokens.copy()  # the read happens here, on the prefetch thread
                tokens.flags.writeable = False
            yield Sample(tokens, s.bounds[s.offsets[r]:s.offsets[r + 1]], i, epoch, p)

    def _prefetched(self, start: int) -> Iterator[Sample]:
        """``_samples`` read by a background thread: chunks of 1, 2, 4, ... up to ``PREFETCH_CHUNK``
        sequences (up to ``prefetch // 2`` when that is smaller) through a queue bounded so that
        about ``prefetch`` sequences are read ahead at most. Chunks amortize the queue's locking
        over several sequences; starting at 1 keeps the first wait to one read."""
        chunk = max(1, min(PREFETCH_CHUNK, self.prefetch // 2))
        q: queue.Queue = queue.Queue(maxsize=max(1, self.prefetch // chunk))
        stop = threading.Event()

        def put(item) -> bool:
            while not stop.is_set():
                try:
                    q.put(item, timeout=0.05)
                    return True
                except queue.Full:
                    continue
            return False

        def produce() -> None:
            try:
                samples, size = self._samples(start, copy=True), 1
                while block := list(itertools.islice(samples, size)):
                    if not put(block):
                        return
                    size = min(chunk, 2 * size)  # 1, 2, 4, ...: the first sample waits for one read only
            except BaseException as e:  # handed to the caller, raised there
                put(_Stop(e))
                return
            put(_Stop())

        thread = threading.Thread(target=produce, name=f"TokenLoader-prefetch-{self.stream}", daemon=True)
        thread.start()
        try:
            while True:
                item = q.get()
                if isinstance(item, _Stop):
                    if item.error is not None:
                        raise item.error
                    return
                yield from item
        finally:
            stop.set()  # the caller stopped early (or the epoch ended): let the thread exit

    def __iter__(self) -> Iterator[Sample]:
        """Yield this stream's sequences from the current position to the end of the epoch, recording
        how long each step waited for its sample."""
        start, epoch = self.position, self.epoch
        source = self._prefetched(start) if self.prefetch else self._samples(start, copy=False)
        waits, size, stall_s, clock = self._waits, self._waits.size, self.stall_ms / 1000.0, time.perf_counter
        try:
            while True:
                t = clock()
                s = next(source, None)
                wait = clock() - t
                if s is None or self.epoch != epoch:
                    return
                steps = self._steps  # telemetry, inline: this loop runs once per sequence
                waits[steps % size] = wait
                self._steps = steps + 1
                self._wait_sum += wait
                if wait > self._wait_max:
                    self._wait_max = wait
                if wait > stall_s:
                    self._stalls += 1
                self.position = s.position + 1  # counted when handed out: a state saved after it resumes at the next
                yield s
        finally:
            source.close()

    # --- telemetry ---------------------------------------------------------------------------------

    def reset_telemetry(self) -> None:
        """Forget the recorded waits (they accumulate across epochs until reset)."""
        self._waits = np.zeros(TELEMETRY_WINDOW, dtype=np.float64)
        self._steps, self._wait_sum, self._wait_max, self._stalls = 0, 0.0, 0.0, 0

    def _window(self) -> tuple[np.ndarray, np.ndarray]:
        """(step numbers, waits in s) of the last ``TELEMETRY_WINDOW`` steps, oldest first."""
        n, size = self._steps, self._waits.size
        steps = np.arange(max(0, n - size), n, dtype=np.int64)
        return steps, self._waits[steps % size]

    def telemetry(self) -> dict[str, Any]:
        """How long the caller waited for each sample: ``steps``, ``mean_ms``, ``max_ms`` and
        ``stalls`` (waits over ``stall_ms``) over every recorded step; ``p50_ms``, ``p99_ms`` over
        the last ``window`` steps (at most ``TELEMETRY_WINDOW``)."""
        _, w = self._window()
        ms = w * 1000.0
        return {"steps": self._steps, "window": int(w.size),
                "p50_ms": round(float(np.percentile(ms, 50)), 4) if w.size else None,
                "p99_ms": round(float(np.percentile(ms, 99)), 4) if w.size else None,
                "max_ms": round(self._wait_max * 1000.0, 4),
                "mean_ms": round(self._wait_sum * 1000.0 / self._steps, 4) if self._steps else None,
                "stalls": self._stalls, "stall_ms": self.stall_ms, "prefetch": self.prefetch,
                "rank": self.rank, "worker_id": self.worker_id, "epoch": self.epoch}

    def write_telemetry(self, path: str | Path) -> dict[str, Path]:
        """Write the per-step waits (``path``.parquet: step, wait_ms, stall) and the summary
        (``path``.json) of ``telemetry()``; returns both paths."""
        import pyarrow as pa

        from lab.io.writers import write_json, write_parquet

        path = Path(path)
        steps, w = self._window()
        ms = w * 1000.0
        table = pa.table({"step": steps, "wait_ms": ms, "stall": ms > self.stall_ms})
        out = {"table": path.with_suffix(".parquet"), "summary": path.with_suffix(".json")}
        out["table"].parent.mkdir(parents=True, exist_ok=True)
        write_parquet(table, out["table"])
        write_json(self.telemetry(), out["summary"])
        return out

    # --- resume ------------------------------------------------------------------------------------

    def seek(self, position: int) -> None:
        """Set how many sequences of this epoch's stream count as already yielded (0 .. len)."""
        if isinstance(position, bool) or not isinstance(position, (int, np.integer)) or not 0 <= position <= len(self):
            raise ConfigError(f"position={position!r} is out of range for this stream: allowed 0 <= position <= "
                              f"{len(self)} (stream {self.stream} of {self.streams}, epoch {self.epoch})")
        self.position = int(position)

    def _order_digest(self) -> str:
        """The order function's name and this stream's first (up to 64) indices, hashed."""
        first = next(self.order.stream_blocks(self.stream, self.streams, block=64), np.zeros(0, dtype=np.int64))
        return hashlib.blake2b(ORDER.encode() + first.astype("<i8").tobytes(), digest_size=16).hexdigest()

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable resume point: position, epoch, seed, stream layout, split identity."""
        return {"version": STATE_VERSION, "order": ORDER, "position": self.position, "epoch": self.epoch,
                "seed": self.seed, "rank": self.rank, "world_size": self.world_size, "worker_id": self.worker_id,
                "num_workers": self.num_workers, "split": dict(self.identity), "order_digest": self._order_digest()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (``state_dict`` of a loader for the same stream, seed and split)."""
        if isinstance(state, dict) and state.get("version") == 1:
            raise ConfigError("state version 1 was saved by a loader whose order was numpy's Generator.permutation; "
                              f"this loader (state version {STATE_VERSION}) orders by {ORDER}, so resuming would "
                              "repeat and skip sequences: start the epoch fresh (build the loader with "
                              "epoch=state['epoch'] + 1, or set_epoch), or resume with the corpus-lab that saved it")
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            got = state.get("version") if isinstance(state, dict) else type(state).__name__
            raise ConfigError(f"not a TokenLoader state of version {STATE_VERSION} (got {got!r}); "
                              "pass what TokenLoader.state_dict() returned")
        wrong = [f"{k}={state.get(k)!r} (this loader: {getattr(self, k)!r})" for k in LAYOUT_KEYS
                 if state.get(k) != getattr(self, k)]
        if wrong:
            raise ConfigError(f"state was saved for another stream layout or seed: {', '.join(wrong)}; build the "
                              "loader with the saved rank, world_size, worker_id, num_workers and seed to resume, "
                              "or start the epoch fresh")
        saved = state.get("split") or {}
        wrong = [f"{k}: {saved.get(k)!r} != {v!r}" for k, v in self.identity.items() if saved.get(k) != v]
        if wrong:
            raise ConfigError(f"state was saved for another split than {self.split_dir} (saved != this): "
                              f"{'; '.join(wrong)}; resume against the split it was saved for (the shards change "
                              "when the run is rematerialized), or start the epoch fresh")
        self.set_epoch(state["epoch"])
        if state.get("order") != ORDER or state.get("order_digest") != self._order_digest():
            raise IntegrityError(f"epoch {self.epoch}'s order differs from the one the state was saved with (saved "
                                 f"order {state.get('order')!r}, this loader {ORDER!r}): resuming would repeat and skip "
                                 "sequences; resume with the corpus-lab that saved the state, or start the epoch fresh")
        self.seek(state["position"])


def _reference_row(split_dir: Path, manifest: SplitManifest, starts: np.ndarray, index: int) -> np.ndarray:
    """Sequence ``index`` read straight from its .bin file by byte offset, without ``open_shard``."""
    k = int(np.searchsorted(starts, index, side="right") - 1)
    dtype = np.dtype(manifest.dtype).newbyteorder("<")
    offset = (index - int(starts[k])) * manifest.seq_len * dtype.itemsize
    return np.fromfile(split_dir / f"{manifest.shards[k].name}.bin", dtype=dtype, count=manifest.seq_len,
                       offset=offset)


def verify(split_dir: str | Path, *, world_size: int, num_workers: int, seed: int = 0, epoch: int = 0,
           save_at: float = 0.5, prefetch: int = 0) -> dict[str, Any]:
    """Simulate one epoch of every (rank, worker) stream, each saved after ``save_at`` of its
    sequences and restored into a new loader (through JSON), and count deliveries; ``prefetch``
    is the loaders' read-ahead (the state must count what was handed out, not what was read).

    Returns token counts (``tokens`` in the split, ``delivered``, ``duplicates`` = deliveries
    beyond the first, ``missing`` = positions never delivered), ``mismatched`` (delivered tokens
    whose value differs from the .bin file read by byte offset, plus sequences with wrong
    ``cu_seqlens``), per-stream lengths, and ``ok``."""
    if not 0.0 <= save_at <= 1.0:
        raise ConfigError(f"save_at={save_at!r}: must be a fraction in [0, 1] of each stream's sequences")
    world_size, num_workers = _check_count("world_size", world_size), _check_count("num_workers", num_workers)
    split_dir = Path(split_dir)
    m = read_manifest(split_dir)
    n, seq_len = m.sequences, m.seq_len
    starts = np.concatenate([[0], np.cumsum([s.sequences for s in m.shards], dtype=np.int64)])
    reference_cu = {}  # shard -> (bounds, offsets), loaded straight from the .npy files
    delivered: list[np.ndarray] = []
    lengths, mismatched, wrong_cu, wrong_epoch = [], 0, 0, 0

    def consume(samples) -> list[int]:
        nonlocal mismatched, wrong_cu, wrong_epoch
        out = []
        for s in samples:
            ref = _reference_row(split_dir, m, starts, s.index)
            mismatched += int(np.count_nonzero(s.tokens != ref)) if s.tokens.shape == ref.shape else seq_len
            k = int(np.searchsorted(starts, s.index, side="right") - 1)
            if k not in reference_cu:
                name = m.shards[k].name
                reference_cu[k] = (np.load(split_dir / f"{name}.bounds.npy"), np.load(split_dir / f"{name}.offsets.npy"))
            bounds, offsets = reference_cu[k]
            r = s.index - int(starts[k])
            wrong_cu += not np.array_equal(s.cu_seqlens, bounds[offsets[r]:offsets[r + 1]])
            wrong_epoch += s.epoch != epoch
            out.append(s.index)
        return out

    for rank in range(world_size):
        for worker_id in range(num_workers):
            kw = {"rank": rank, "world_size": world_size, "worker_id": worker_id, "num_workers": num_workers,
                  "seed": seed, "epoch": epoch, "prefetch": prefetch}
            first = TokenLoader(split_dir, **kw)
            stop = int(save_at * len(first))
            got = consume(itertools.islice(iter(first), stop))
            state = json.loads(json.dumps(first.state_dict()))  # what a checkpoint file would hold
            del first
            second = TokenLoader(split_dir, **kw)
            second.load_state_dict(state)
            got += consume(second)
            lengths.append(len(got))
            delivered.append(np.asarray(got, dtype=np.int64))
    counts = np.bincount(np.concatenate(delivered), minlength=n) if n else np.zeros(0, dtype=np.int64)
    report = {"tokens": n * seq_len, "delivered": int(counts.sum()) * seq_len,
              "duplicates": int(np.maximum(counts - 1, 0).sum()) * seq_len,
              "missing": int(np.count_nonzero(counts == 0)) * seq_len, "streams": world_size * num_workers,
              "sequences": n, "seq_len": seq_len, "mismatched": mismatched + wrong_cu * seq_len,
              "wrong_epoch": wrong_epoch, "stream_lengths": {"min": min(lengths), "max": max(lengths)},
              "save_at": save_at, "seed": seed, "epoch": epoch}
    report["ok"] = (report["duplicates"] == report["missing"] == report["mismatched"] == wrong_epoch == 0
                    and report["delivered"] == report["tokens"])
    return report


# --- PyTorch ---------------------------------------------------------------------------------------

_TORCH_DATASET = None


def _torch_dataset_class():
    """Build ``TorchTokenDataset`` on first use, so torch is imported only by those who need it."""
    global _TORCH_DATASET
    if _TORCH_DATASET is None:
        try:
            import torch
            from torch.utils.data import IterableDataset, get_worker_info
        except ImportError as e:
            raise ConfigError("lab.tokens.loader.torch_dataset needs PyTorch, which is not installed: pip install torch") from e

        class TorchTokenDataset(IterableDataset):
            """Each DataLoader worker reads its own stream (worker_id/num_workers from
            ``get_worker_info``); yields dicts of int64 ``tokens`` [seq_len], int32 ``cu_seqlens``,
            and ints ``index``, ``epoch``, ``position``, ``worker_id``."""

            def __init__(self, split_dir, *, states=None, epoch=0, **kw):
                super().__init__()
                self.split_dir, self.states, self.epoch, self.kw = str(split_dir), states, epoch, kw

            def set_epoch(self, epoch: int) -> None:
                self.epoch, self.states = epoch, None

            def __iter__(self):
                info = get_worker_info()
                worker_id, num_workers = (0, 1) if info is None else (info.id, info.num_workers)
                loader = TokenLoader(self.split_dir, worker_id=worker_id, num_workers=num_workers, epoch=self.epoch,
                                     **self.kw)
                if self.states is not None:
                    if len(self.states) != num_workers:
                        raise ConfigError(f"{len(self.states)} saved worker states for {num_workers} DataLoader "
                                          "workers: resume with the num_workers the states were saved with")
                    loader.load_state_dict(self.states[worker_id])
                for s in loader:
                    # int64 copies: torch's uint16 support is thin, and embeddings take int64
                    yield {"tokens": torch.from_numpy(s.tokens.astype(np.int64)),
                           "cu_seqlens": torch.from_numpy(s.cu_seqlens.astype(np.int32)),
                           "index": s.index, "epoch": s.epoch, "position": s.position, "worker_id": worker_id}

        TorchTokenDataset.__module__ = __name__
        TorchTokenDataset.__qualname__ = "TorchTokenDataset"
        _TORCH_DATASET = TorchTokenDataset
    return _TORCH_DATASET


def __getattr__(name: str):
    # lets pickle find lab.tokens.loader.TorchTokenDataset in spawned DataLoader workers
    if name == "TorchTokenDataset":
        return _torch_dataset_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def torch_dataset(split_dir: str | Path, **kw):
    """A PyTorch ``IterableDataset`` over ``split_dir``; ``kw``: rank, world_size, seed, epoch,
    prefetch, stall_ms (``TokenLoader``'s), and ``states`` (one ``TokenLoader.state_dict()`` per
    DataLoader worker, to resume).

    A DataLoader prefetches, so worker-side positions run ahead of what the trainer consumed.
    To resume exactly, the trainer keeps ``consumed[w] = sample["position"] + 1`` of the last
    sample it used from each worker ``w`` and, at a checkpoint, builds each worker's state with
    ``TokenLoader(split_dir, ..., worker_id=w, num_workers=k)``, ``seek(consumed[w])``,
    ``state_dict()``.
    """
    for k in ("worker_id", "num_workers"):
        if k in kw:
            raise ConfigError(f"torch_dataset({k}=...): the DataLoader sets {k} in each worker; pass "
                              "DataLoader(num_workers=...) instead")
    return _torch_dataset_class()(split_dir, **kw)
