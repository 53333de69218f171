"""engine: runs a run's tasks on Dask (or in the calling process). The only module of corpus-lab that imports Dask.

A run plans its partitions, starts (or attaches to) a cluster and runs the steps of ``lab.steps`` whose
inputs changed: annotate, near dedup, boilerplate lines, the tokenizer fit, tokenize and materialize.
Every step's tasks go through ``map_tasks`` (submit, a progress bar, retries, results in task order);
then ``lab.manifest`` writes ``stats/merged.json`` and ``manifest.json``. Executors: ``DaskExecutor`` over
a ``distributed.Client``, or ``InProcessExecutor`` (``client="inprocess"``), with the same outputs byte
for byte. A small input (``engine.inprocess_bytes``) runs in this process unless ``engine.scheduler`` or
``engine.n_workers`` is given. A complete partition is skipped, so a killed run resumes; an annotate
task that keeps failing (``engine.retries``) quarantines its partition; a full disk stops the run with
``DiskFullError``. Outputs do not depend on the number of workers or on the resume point.
"""

from __future__ import annotations

import functools
import hashlib
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator, Protocol

from lab import __version__, dedup, manifest, steps
from lab.annotate import REPORT_EVERY_S, annotate_partition
from lab.config import Config
from lab.errors import ConfigError, DiskFullError, StoreUnreachableError
from lab.io import mirror
from lab.io.lock import RunLock, StoreLease
from lab.io.partitions import Partition
from lab.io.run import RunLayout
from lab.plan import costs

# worker processes run one thread each: keep native libraries from starting thread pools of their own
_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}

INPROCESS = "inprocess"  # run(cfg, client=INPROCESS): every task in the calling process


# --- the cluster -------------------------------------------------------------------------------------


@contextmanager
def client_for(cfg: Config, *, quiet: bool = False) -> Iterator[object]:
    """A ``distributed.Client``: attached to ``engine.scheduler`` or to a new LocalCluster."""
    import warnings

    import dask
    from distributed import Client, LocalCluster

    eng = cfg.engine
    if eng.scheduler:
        try:
            client = Client(eng.scheduler, timeout=f"{eng.connect_timeout:g}s")
        except (OSError, TimeoutError) as e:
            raise ConfigError(f"engine.scheduler={eng.scheduler!r}: cannot connect within {eng.connect_timeout:g} s "
                              f"({e}); start one with `dask scheduler`, omit --scheduler to run a LocalCluster, or "
                              "raise engine.connect_timeout") from None
        try:
            _check_workers(client, eng.scheduler, eng.workers_timeout)
            yield client
        finally:
            client.close()
        return
    n = eng.n_workers or usable_cores()
    # the worker processes' environment only; the calling process (a notebook) keeps its own
    environ = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **_THREAD_ENV}
    with dask.config.set({"distributed.worker.daemon": False, "logging.distributed": "error",
                          "distributed.nanny.pre-spawn-environ": environ}):
        with warnings.catch_warnings():  # 8787 taken: Dask serves the dashboard on a free port, the run prints it
            warnings.filterwarnings("ignore", message=r"Port \d+ is already in use", category=UserWarning)
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, memory_limit=eng.memory_limit,
                                   dashboard_address="127.0.0.1:8787", silence_logs=50)
        client = Client(cluster)
        try:
            yield client
        finally:
            client.close()
            cluster.close()
            steps.sweep_temporary(cfg.run_dir)  # the workers are gone: files they were writing when stopped


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (``taskset``, a container's cpuset), which
    ``os.cpu_count()`` ignores; one worker per core of them is the LocalCluster's default."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity on this platform
        return os.cpu_count() or 1


def _prepare_worker() -> str:
    """On a worker of an existing cluster: cap native thread pools (one task per thread) and say
    which corpus-lab it runs."""
    for k, v in _THREAD_ENV.items():
        os.environ.setdefault(k, v)
    return __version__


def _check_workers(client, address: str, timeout: float) -> None:
    """An existing cluster has workers, and they run this corpus-lab: else a clear error, before any work."""
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        raise ConfigError(f"engine.scheduler={address!r} has no workers after {timeout:g} s; start some with "
                          f"`dask worker {address} --nthreads 1`, or raise engine.workers_timeout") from None
    try:
        versions = client.run(_prepare_worker)
    except Exception as e:  # the workers cannot unpickle a lab function: corpus-lab is not installed there
        raise ConfigError(f"the workers of {address} cannot run corpus-lab ({type(e).__name__}: {e}); install "
                          f"corpus-lab {__version__} in the workers' environment") from None
    wrong = {w: v for w, v in versions.items() if v != __version__}
    if wrong:
        w, v = next(iter(wrong.items()))
        raise ConfigError(f"{len(wrong)} workers of {address} run corpus-lab {v} (e.g. {w}), this driver {__version__}; "
                          "install the same version everywhere")


def _check_run_dir_shared(client, layout: RunLayout) -> None:
    """Every worker of an existing cluster sees the run directory (a shared filesystem)."""
    seen = client.run(os.path.isdir, str(layout.root.resolve()))
    blind = sorted(w for w, ok in seen.items() if not ok)
    if blind:
        raise ConfigError(f"{len(blind)} workers (e.g. {blind[0]}) do not see the run directory {layout.root.resolve()}; "
                          "put --output-dir on a filesystem every worker mounts at the same path")


# --- executors ---------------------------------------------------------------------------------------


class Reports(Protocol):
    """Where running tasks report progress: ``receive(task key, amount)`` is called in the driver."""

    def poll(self) -> None:
        """Pass what arrived since the last poll to ``receive``."""


class Executor(Protocol):
    """Runs tasks: ``fn(*args)`` where an argument may be another task's handle (its result is passed)."""

    def submit(self, fn: Callable, *args: Any, key: str, retries: int = 0, reports: Reports | None = None,
               item: str = "") -> Any:
        """A handle to ``fn(*args)`` (with ``report=`` a callable sending amounts for ``item`` to ``reports``),
        tried ``1 + retries`` times while it raises."""

    def wait(self, pending: set, timeout: float | None) -> tuple[set, set]:
        """(done, still pending): at least one done, unless ``timeout`` seconds passed."""

    def error(self, handle: Any) -> BaseException | None:
        """The exception of a finished task's last attempt, None if it succeeded."""

    def result(self, handle: Any) -> Any:
        """The task's result (waits for it; raises its exception)."""

    def reports(self, topic: str, receive: Callable[[str, int], None]) -> Reports:
        """A channel for tasks to report progress on, named ``topic`` (unique to the run and step)."""

    def broadcast(self, obj: Any) -> Any:
        """``obj`` made available to every task (pass the returned handle as an argument)."""

    def cancel(self, handles: list) -> None:
        """Stop the tasks that have not finished."""


def _reporting_task(fn: Callable, topic: str, item: str, *args: Any) -> Any:
    """``fn(*args)`` on a worker, reporting to the driver's queue ``topic`` as ``[item, amount]``."""
    from distributed import Queue

    queue = Queue(topic)
    return fn(*args, report=lambda n: queue.put([item, int(n)]))


class _QueueReports:
    """Reports through a ``distributed.Queue``: workers put, the driver polls."""

    def __init__(self, client, topic: str, receive: Callable[[str, int], None]):
        from distributed import Queue

        self.topic, self.receive = topic, receive
        self.queue = Queue(topic, client=client)

    def poll(self) -> None:
        if self.queue.qsize():
            for item, n in self.queue.get(batch=True):
                self.receive(item, n)


class DaskExecutor:
    """Tasks on the workers of a ``distributed.Client``; Dask retries a task that raises, and runs the
    tasks of a worker that died again elsewhere."""

    def __init__(self, client):
        self.client = client

    @property
    def dashboard_link(self) -> str | None:
        return getattr(self.client, "dashboard_link", None)

    def submit(self, fn, *args, key, retries=0, reports=None, item=""):
        if reports is not None:
            args = (fn, reports.topic, item, *args)
            fn = _reporting_task
        return self.client.submit(fn, *args, key=key, retries=retries or None, pure=False)

    def wait(self, pending, timeout):
        from distributed import TimeoutError as DaskTimeout
        from distributed import wait

        try:
            done, pending = wait(pending, timeout=timeout, return_when="FIRST_COMPLETED")
        except (DaskTimeout, TimeoutError):
            done = set()
        return set(done), set(pending)

    def error(self, handle):
        return handle.exception() if handle.status == "error" else None

    def result(self, handle):
        return handle.result()

    def reports(self, topic, receive):
        return _QueueReports(self.client, topic, receive)

    def broadcast(self, obj):
        return self.client.scatter(obj, broadcast=True, hash=False)

    def cancel(self, handles):
        for h in handles:
            h.cancel()


class _Task:
    """A task of ``InProcessExecutor``: run when first waited for (or needed by another task)."""

    def __init__(self, seq: int, fn: Callable, args: tuple, kwargs: dict, retries: int):
        self.seq, self.fn, self.args, self.kwargs, self.retries = seq, fn, args, kwargs, retries
        self.done, self.value, self.exc = False, None, None


class _DirectReports:
    """Reports passed on to ``receive`` as they are made (the task runs in this process)."""

    def __init__(self, receive: Callable[[str, int], None]):
        self.receive = receive

    def poll(self) -> None:
        pass


class InProcessExecutor:
    """Every task in the calling process, one at a time, in the order submitted: no cluster, no
    pickling. The same task functions as on Dask, so the same bytes."""

    def __init__(self) -> None:
        self._seq = 0

    dashboard_link = None

    def submit(self, fn, *args, key, retries=0, reports=None, item=""):
        self._seq += 1
        kwargs = {"report": functools.partial(reports.receive, item)} if reports is not None else {}
        return _Task(self._seq, fn, args, kwargs, retries)

    def _run(self, task: _Task) -> None:
        if task.done:
            return
        args = [self.result(a) if isinstance(a, _Task) else a for a in task.args]
        for _ in range(1 + task.retries):
            try:
                task.value, task.exc = task.fn(*args, **task.kwargs), None
                break
            except Exception as e:  # noqa: BLE001 - a task's failure is reported like a worker's
                task.exc = e
        task.done = True
        task.fn = task.args = task.kwargs = None  # hold the result only

    def wait(self, pending, timeout):
        first = min(pending, key=lambda t: t.seq)
        self._run(first)
        return {first}, set(pending) - {first}

    def error(self, handle):
        self._run(handle)
        return handle.exc

    def result(self, handle):
        self._run(handle)
        if handle.exc is not None:
            raise handle.exc
        return handle.value

    def reports(self, topic, receive):
        return _DirectReports(receive)

    def broadcast(self, obj):
        return obj

    def cancel(self, handles):
        pass


@contextmanager
def executor_for(cfg: Config, client: object | None = None) -> Iterator[Executor]:
    """The executor of a run: ``client`` as given (an Executor, a ``distributed.Client``, or
    ``"inprocess"``), else a Dask client for ``cfg`` (``client_for``), closed afterwards."""
    if client == INPROCESS:
        try:
            yield InProcessExecutor()
        finally:
            steps.sweep_temporary(cfg.run_dir)  # an interrupted task's unfinished files
    elif client is None:
        with client_for(cfg) as c:
            yield DaskExecutor(c)
    elif hasattr(client, "submit") and hasattr(client, "scatter"):  # a distributed.Client
        yield DaskExecutor(client)
    else:
        yield client


# --- tasks on a stored run --------------------------------------------------------------------------


class Stored:
    """A run directory in object storage as its tasks see it: the run's ``url``, the driver's working copy
    ``root`` (the run-directory argument the tasks are given) and what a task reads (prefixes of the run).
    A task pulls what it reads into its own process's working copy, runs there, and pushes what it wrote;
    the driver pushes before the tasks start and pulls after."""

    def __init__(self, url: str, root: str, reads: tuple[str, ...] = ()) -> None:
        self.url, self.root, self.reads = url, root, reads

    def reading(self, *reads: str) -> Stored:
        return Stored(self.url, self.root, reads)


def _stored(cfg: Config, layout: RunLayout) -> Stored | None:
    return Stored(cfg.run_url, str(layout.root)) if cfg.run_url else None


def _local(fn: Callable, args: tuple, old: str, new: str) -> tuple[Callable, tuple]:
    """``fn`` and ``args`` with the driver's run directory ``old`` replaced by this process's ``new``."""
    swap = tuple(new if isinstance(a, str) and a == old else a for a in args)
    if isinstance(fn, functools.partial):
        inner, inner_args = _local(fn.func, fn.args, old, new)
        fn = functools.partial(inner, *inner_args, **fn.keywords)
    return fn, swap


def _task(fn: Callable, stored: Stored | None, key: str, *args: Any, **kw: Any) -> Any:
    """``fn(*args)`` on a worker: in this process's working copy of a stored run; a store that does not
    answer raises ``StoreUnreachableError`` (never a partition's failure)."""
    try:
        if stored is None:
            return fn(*args, **kw)
        wc = mirror.working_copy(stored.url)
        if stored.reads:
            wc.pull(*stored.reads)
        fn, args = _local(fn, args, stored.root, str(wc.path))
        out = fn(*args, **kw)
        wc.push()
        return out
    except Exception as e:  # noqa: BLE001 - a store's client raises its own connection errors
        wrapped = StoreUnreachableError.wrap(e, stored.url if stored else "an input")
        if wrapped is e:
            raise
        raise wrapped from None


# --- where the time goes ----------------------------------------------------------------------------


class Timeline:
    """Wall seconds of one invocation's phases: each phase whole, and the part of it during which its tasks
    ran (``map_tasks``); the rest is serial, the driver's alone, what more workers cannot shorten. Written
    to the manifest as ``last_run.timeline``."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.tasks: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - t

    def tasks_ran(self, name: str, seconds: float) -> None:
        self.tasks[name] = self.tasks.get(name, 0.0) + seconds

    def summary(self) -> dict[str, dict[str, float]]:
        """phase -> wall, tasks and serial seconds, in the order the phases ran.

        >>> t = Timeline(); t.wall["annotate"] = 10.0; t.tasks_ran("annotate", 9.5)
        >>> t.summary()
        {'annotate': {'wall': 10.0, 'tasks': 9.5, 'serial': 0.5}}
        """
        return {k: {"wall": round(w, 3), "tasks": round(self.tasks.get(k, 0.0), 3),
                    "serial": round(max(w - self.tasks.get(k, 0.0), 0.0), 3)} for k, w in self.wall.items()}


# --- map_tasks ---------------------------------------------------------------------------------------


def _bar(progress: bool, total: int, *, desc: str, unit: str, scale: bool = False):
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, unit_scale=scale, desc=desc, disable=not progress or not total,
                file=sys.stderr, dynamic_ncols=True)


def map_tasks(ex: Executor, fn: Callable, tasks: dict[str, tuple], *, prefix: str, retries: int = 0, bar=None,
              sizes: dict[str, int] | None = None, reports: str | None = None,
              on_error: Callable[[str, BaseException], Any] | None = None,
              on_result: Callable[[str, Any], None] | None = None, gather: bool = True,
              cost: tuple[str, str] | None = None, stored: Stored | None = None,
              reads: Callable[[str], tuple[str, ...]] | None = None,
              clock: Callable[[float], None] | None = None) -> list:
    """``fn(*args)`` for every ``key -> args`` of ``tasks`` on ``ex``; the results in the order of ``tasks``.

    - ``prefix``: task keys are ``{prefix}-{key}`` (name the run and its state in it: two runs on one
      scheduler never share results).
    - ``bar``: a tqdm bar moved by one per task, or by ``sizes[key]`` (then ``reports``, a topic, lets
      each task move it within itself: ``fn`` takes ``report=`` and calls it with the amounts done).
    - ``retries``: a task that raises runs again, up to this many times; then ``on_error(key, error)``
      gives its result (annotate quarantines the partition) or, without it, the error is raised.
    - ``on_result(key, result)``: called as each task finishes (in key order among those finishing
      together); ``gather=False`` returns the task handles instead of the results (to pass to
      further tasks, the results staying where they are).
    - ``cost``: ``(step, run_dir)``: each task records its CPU seconds for the step (``lab.plan.costs``).
    - ``stored``: the run is in object storage: the driver pushes first; each task pulls what it reads
      (``reads(key)``: prefixes of the run) and pushes what it writes; the driver pulls what they wrote
      when all are done.
    - ``clock(seconds)``: told how long the tasks ran, from the first submitted to the last finished.
    """
    sizes = sizes or {}
    shown = dict.fromkeys(tasks, 0)  # of each task's size, what the bar shows (reports may overshoot a
    # compressed file's size: its records hold more bytes than the file)

    def advance(key: str, n: int) -> None:
        step = max(min(n, sizes.get(key, 1) - shown[key]), 0)
        shown[key] += step
        if bar is not None:
            bar.update(step)

    channel = ex.reports(reports, advance) if reports else None
    def task(key: str) -> Callable:
        inner = fn if cost is None else functools.partial(costs.costed, fn, cost[0], cost[1], key)
        here = stored.reading(*reads(key)) if stored is not None and reads is not None else stored
        return functools.partial(_task, inner, here, key)

    if stored is not None:
        mirror.working_copy(stored.url).push()
    began = time.perf_counter()
    handles = {ex.submit(task(key), *args, key=f"{prefix}-{key}", retries=retries, reports=channel, item=key): key
               for key, args in tasks.items()}
    order = {key: i for i, key in enumerate(tasks)}
    out: dict[str, Any] = {}
    try:
        pending = set(handles)
        while pending:
            done, pending = ex.wait(pending, REPORT_EVERY_S if channel is not None else None)
            if channel is not None:
                channel.poll()
            for h in sorted(done, key=lambda h: order[handles[h]]):
                key = handles[h]
                error = ex.error(h)
                if error is not None:
                    if on_error is None:
                        raise error
                    out[key] = on_error(key, error)
                else:
                    out[key] = ex.result(h) if gather else h
                    if on_result is not None:
                        on_result(key, out[key])
                advance(key, sizes.get(key, 1))  # the rest of a finished task
    except BaseException:
        ex.cancel(list(handles))
        raise
    if clock is not None:
        clock(time.perf_counter() - began)
    if stored is not None:
        mirror.working_copy(stored.url).pull()
    return [out[key] for key in tasks]


# --- a run -------------------------------------------------------------------------------------------


def run(cfg: Config, *, progress: bool = True, overwrite: bool = False, client: object | None = None) -> dict:
    """Annotate every partition of ``cfg.inputs`` into ``cfg.run_dir`` and run the later steps; returns the
    manifest. The run directory is locked meanwhile (``lab.io.lock``): a second run on it fails at once.

    ``client``: None (a LocalCluster, or ``engine.scheduler``), a ``distributed.Client``, an ``Executor``,
    or ``"inprocess"`` (every task in this process, no cluster; the same outputs)."""
    if client is None and cfg.engine.scheduler:  # connect before anything is written
        with client_for(cfg) as c:
            return run(cfg, progress=progress, overwrite=overwrite, client=c)
    with StoreLease(cfg.run_url) if cfg.run_url else RunLock(cfg.run_dir):
        return _run(cfg, progress=progress, overwrite=overwrite, client=client)


def in_process(cfg: Config, input_bytes: int) -> bool:
    """Whether a run with no client given runs in this process: its input is small (``engine.inprocess_bytes``)
    and neither a scheduler nor a number of workers is asked for. Starting a LocalCluster costs seconds
    (worker processes, imports); below a few MB the tasks take less.

    >>> from lab.config import Config
    >>> in_process(Config(), 1_000_000), in_process(Config(), 10**9)
    (True, False)
    """
    eng = cfg.engine
    return not eng.scheduler and eng.n_workers == 0 and input_bytes <= eng.inprocess_bytes


def _run(cfg: Config, *, progress: bool, overwrite: bool, client: object | None) -> dict:
    tl = Timeline()
    with tl.phase("prepare"):  # listing, planning, fingerprints: before any task
        if cfg.run_url:  # the driver's working copy of a stored run, up to date before anything is compared
            mirror.working_copy(cfg.run_url).pull()
        layout, parts, listing = steps.prepare(cfg, overwrite=overwrite)
        if client is None and in_process(cfg, sum(p.size for p in parts)):
            client = INPROCESS
        if client is not None and client != INPROCESS and cfg.engine.scheduler and not cfg.run_url:
            _check_run_dir_shared(getattr(client, "client", client), layout)
        shash = cfg.signals_hash()
        buckets = steps.n_buckets(cfg, parts)
        fps = steps.fingerprints(layout, parts, listing)  # every input file's content hash, read once per run
        todo = [p for p in parts if not steps.partition_complete(layout, p, shash, buckets, fps[p.key])]
        started = time.time()
        dedup_state = steps.dedup_state(cfg, layout, parts, buckets)
        did = {"annotate": {"partitions_run": len(todo), "partitions_reused": len(parts) - len(todo)},
               "near_dedup": "reused", "boilerplate": "reused",
               "tokenizer": "reused" if cfg.tokenizer.enabled else "disabled",
               "tokenize": {"partitions_run": 0}, "materialize": "reused" if cfg.tokenizer.enabled else "disabled",
               # where the tasks ran: this process, a LocalCluster, or the scheduler's workers
               "executor": "inprocess" if client == INPROCESS else "scheduler" if cfg.engine.scheduler
               else "cluster" if client is None else "client"}
        work = (todo or not steps.dedup_complete(layout, dedup_state)
                or not steps.boilerplate_complete(layout, steps.boilerplate_state(cfg, layout, parts, buckets))
                or not steps.tokenize_complete(cfg, layout, parts)
                or not steps.tokens_current(cfg, layout, parts))
    if work:
        stack = ExitStack()
        with tl.phase("cluster_start"):
            ex = stack.enter_context(executor_for(cfg, client))
        try:
            _run_all(ex, cfg, layout, parts, todo, buckets, did, fps, tl, progress=progress)
        finally:
            with tl.phase("cluster_stop"):
                stack.close()
    steps.sweep_temporary(layout.root)  # every task is over: a killed worker's unfinished files
    out = manifest.write(cfg, layout, parts, steps=did, seconds=time.time() - started, listing=listing,
                         timeline=tl.summary())
    if cfg.run_url:
        mirror.working_copy(cfg.run_url).push()  # the manifest last: the stored run is complete
    return out


def _run_all(ex: Executor, cfg: Config, layout: RunLayout, parts: list[Partition], todo: list[Partition],
             buckets: int, did: dict, fps: dict[str, dict], tl: Timeline, *, progress: bool) -> None:
    """Every step whose inputs changed; ``did`` records what each step did (run or reused), ``tl`` how long
    each took and how much of that its tasks ran."""
    if todo:
        with tl.phase("annotate"):
            _annotate(ex, cfg, layout, todo, buckets, fps, tl, progress=progress)
    with tl.phase("near_dedup"):
        if _near_dedup(ex, cfg, layout, parts, buckets, tl, progress=progress):
            did["near_dedup"] = "computed"
    with tl.phase("boilerplate"):
        if _boilerplate(ex, cfg, layout, parts, buckets, tl, progress=progress):
            did["boilerplate"] = "computed"
    did.update(_tokenize(ex, cfg, layout, parts, tl, progress=progress))
    with tl.phase("materialize"):
        if _materialize(ex, cfg, layout, parts, tl, progress=progress):
            did["materialize"] = "computed"


def _run_id(layout: RunLayout, *parts: str) -> str:
    """Names a step's tasks: the run directory and what the step's outputs depend on."""
    return hashlib.blake2b("|".join([str(layout.root.resolve()), *parts]).encode(), digest_size=8).hexdigest()


def _annotate(ex: Executor, cfg: Config, layout: RunLayout, todo: list[Partition], buckets: int,
              fps: dict[str, dict], tl: Timeline, *, progress: bool) -> None:
    """One annotate task per partition; a partition failing every attempt is quarantined, a full disk
    stops the run."""
    link = getattr(ex, "dashboard_link", None)
    if progress and link:
        print(f"Dask dashboard: {link}", file=sys.stderr)
    shash = cfg.signals_hash()  # the driver's: what the next run compares each partition with
    run_id = _run_id(layout, shash)
    parts = {p.key: p for p in todo}
    # the largest partitions first: the last tasks a worker takes are the short ones, so workers finish together
    tasks = {p.key: (p, cfg, str(layout.root), buckets, shash, fps[p.key])
             for p in sorted(todo, key=lambda p: (-p.size, p.index))}
    bar = _bar(progress, sum(p.size for p in todo), desc="annotate", unit="B", scale=True)
    docs = 0

    def quarantine(key: str, error: BaseException) -> dict:
        if StoreUnreachableError.is_unreachable(error):  # the store, not the partition: stop; a rerun resumes
            raise StoreUnreachableError.wrap(error, cfg.run_url or parts[key].source)
        if DiskFullError.is_disk_full(error):  # the disk, not the partition: stop; a rerun resumes
            if not isinstance(error, DiskFullError):
                error = DiskFullError.writing(error.filename or layout.root)
            raise error
        out = steps.quarantine(layout, parts[key], cfg, error, fps[key])
        bar.write(f"quarantined partition {key} ({parts[key].source}): {out['error']}")
        bar.set_postfix(docs=docs, refresh=False)
        return out

    def count(key: str, result: dict) -> None:
        nonlocal docs
        docs += result["docs"]
        bar.set_postfix(docs=docs, refresh=False)

    try:
        map_tasks(ex, annotate_partition, tasks, prefix=f"annotate-{run_id}", retries=cfg.engine.retries, bar=bar,
                  sizes={p.key: p.size for p in todo}, reports=f"progress-annotate-{run_id}" if progress else None,
                  on_error=quarantine, on_result=count, stored=_stored(cfg, layout), reads=lambda k: ("decontam",),
                  clock=functools.partial(tl.tasks_ran, "annotate"))
    finally:
        bar.close()


def _near_dedup(ex: Executor, cfg: Config, layout: RunLayout, parts: list[Partition], buckets: int, tl: Timeline,
                *, progress: bool) -> bool:
    """The LSH shuffle's reduce tasks, then the spanning-forest merge tree and the grid clusters
    (unless the partitions they read are unchanged); whether it ran."""
    state = steps.dedup_state(cfg, layout, parts, buckets)
    if steps.dedup_complete(layout, state):
        return False
    keys = steps.dedup_start(layout, parts, buckets)
    started = time.time()
    clock = costs.Step(layout.root, "near_dedup_shuffle")
    nd = cfg.stages.near_dedup
    root = str(layout.root)
    run_id = _run_id(layout, cfg.signals_hash(), state["partitions"])
    bar = _bar(progress, buckets, desc="near dedup", unit="bucket")
    cost = ("near_dedup_shuffle", root)
    stored = _stored(cfg, layout)
    reads = ("dedup/bands", "dedup/signatures", "dedup/shingles")
    try:
        forests = map_tasks(ex, dedup.reduce_bucket, {str(b): (root, b, keys, nd) for b in range(buckets)},
                            prefix=f"lsh-reduce-{run_id}", retries=cfg.engine.retries, bar=bar, gather=False, cost=cost,
                            stored=stored, reads=lambda k: reads, clock=functools.partial(tl.tasks_ran, "near_dedup"))
        level = 0
        while len(forests) > 1:  # pairwise tree: no task holds more than two forests
            forests = [ex.submit(functools.partial(_task, functools.partial(costs.costed, dedup.merge_forests, *cost,
                                                                            f"msf-{level}-{i}"), stored, ""),
                                 *forests[i:i + 2], key=f"msf-{run_id}-{level}-{i}")
                       if i + 1 < len(forests) else forests[i] for i in range(0, len(forests), 2)]
            level += 1
        nodes = ex.result(ex.submit(functools.partial(_task, functools.partial(costs.costed, dedup.write_clusters, *cost,
                                                                               "clusters"), stored, ""),
                                    root, forests[0], key=f"clusters-{run_id}"))
    finally:
        bar.close()
    if stored is not None:
        mirror.working_copy(stored.url).pull()
    steps.dedup_finish(layout, state, buckets, nodes, time.time() - started)
    clock.finish(inprocess=isinstance(ex, InProcessExecutor))
    return True


def _boilerplate(ex: Executor, cfg: Config, layout: RunLayout, parts: list[Partition], buckets: int, tl: Timeline,
                 *, progress: bool) -> bool:
    """The boilerplate-line count tables merged bucket by bucket (the near-dedup shuffle's buckets),
    then ``bp_line_frac`` per partition (``lab.linecount``), unless what they read is unchanged;
    whether it ran."""
    from lab import linecount

    state = steps.boilerplate_state(cfg, layout, parts, buckets)
    if steps.boilerplate_complete(layout, state):
        return False
    keys = steps.boilerplate_start(layout, parts)
    started = time.time()
    clock = costs.Step(layout.root, "boilerplate_merge")
    root = str(layout.root)
    min_docs = cfg.stages.boilerplate.min_docs
    run_id = _run_id(layout, cfg.signals_hash(), state["partitions"], str(min_docs))
    bar = _bar(progress, buckets + len(keys), desc="boilerplate", unit="task")
    cost = ("boilerplate_merge", root)
    try:
        stored = _stored(cfg, layout)
        rows = map_tasks(ex, linecount.reduce_bucket, {f"reduce-{b}": (root, b, keys) for b in range(buckets)},
                         prefix=f"lines-reduce-{run_id}", retries=cfg.engine.retries, bar=bar, cost=cost,
                         stored=stored, reads=lambda k: ("boilerplate/counts",),
                         clock=functools.partial(tl.tasks_ran, "boilerplate"))
        map_tasks(ex, linecount.signal_partition, {f"signal-{k}": (root, k, min_docs) for k in keys},
                  prefix=f"lines-signal-{run_id}", retries=cfg.engine.retries, bar=bar, cost=cost, stored=stored,
                  reads=lambda k: ("boilerplate/merged", f"signals/part-{k[7:]}.parquet",
                                   f"boilerplate/lines/part-{k[7:]}.parquet"),
                  clock=functools.partial(tl.tasks_ran, "boilerplate"))
    finally:
        bar.close()
    steps.boilerplate_finish(layout, state, int(sum(rows)), time.time() - started)
    clock.finish(inprocess=isinstance(ex, InProcessExecutor))
    return True


def _fit_tokenizer(ex: Executor, cfg: Config, layout: RunLayout, parts: list[Partition]) -> tuple[dict, str | None]:
    """The tokenizer fit: its sample drawn here, the fit itself in a child process of the driver when the
    tasks run on a cluster (whose thread caps the driver's environment inherits): the trainer then uses
    every core of the driver's machine, and its CPU is recorded as the step's. Returns (what it did, the
    tokenizer's sha256 or None)."""
    clock = costs.Step(layout.root, "tokenizer_fit") if not steps.tokenizer_current(cfg, layout, parts) else None
    job = steps.tokenizer_job(cfg, layout, parts)
    if isinstance(job, functools.partial) and job.func is steps.train and not isinstance(ex, InProcessExecutor):
        driver_cpu = clock.driver() if clock is not None else None
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=_uncap_threads,
                                 initargs=(usable_cores(),)) as pool:
            did, sha = pool.submit(costs.costed, job.func, "tokenizer_fit", str(layout.root), "fit", *job.args).result()
        if clock is not None:
            clock.finish(driver_cpu=driver_cpu)
        return did, sha
    did, sha = job()
    if clock is not None and sha is not None:
        clock.finish(inprocess=isinstance(ex, InProcessExecutor))
    return did, sha


def _uncap_threads(n: int) -> None:
    """In the fit's child: the trainer's thread pool as wide as the machine (a LocalCluster leaves the
    workers' one-thread caps in the driver's environment, which the child inherits)."""
    os.environ["RAYON_NUM_THREADS"] = str(n)
    os.environ["TOKENIZERS_PARALLELISM"] = "true"


def _tokenize(ex: Executor, cfg: Config, layout: RunLayout, parts: list[Partition], tl: Timeline, *,
              progress: bool) -> dict:
    """Fit the run's tokenizer on its stratified sample (once; reused while nothing it depends on
    changes), then count every partition's tokens, one tokenizer per worker. Returns what it did,
    for the manifest's ``last_run.steps``."""
    if not cfg.tokenizer.enabled:
        return {}
    with tl.phase("tokenizer_fit"):
        did, sha = _fit_tokenizer(ex, cfg, layout, parts)
    if sha is None:
        return did
    with tl.phase("tokenize"):
        return {**did, **_count_tokens(ex, cfg, layout, parts, sha, tl, progress=progress)}


def _count_tokens(ex: Executor, cfg: Config, layout: RunLayout, parts: list[Partition], sha: str, tl: Timeline, *,
                  progress: bool) -> dict:
    """One tokenize task per partition whose token counts are missing or stale."""
    from lab.tokens import tokenize

    strip = steps.strip_state(cfg, layout, parts)
    keys = steps.tokenize_start(layout, parts, sha, strip)
    if not keys:
        return {"tokenize": {"partitions_run": 0}}
    clock = costs.Step(layout.root, "tokenize")
    run_id = _run_id(layout, sha, repr(strip))
    size = {p.key: p.size for p in parts}
    keys = sorted(keys, key=lambda k: -size.get(k, 0))  # the largest first, as annotate (stable: ties by key)
    bar = _bar(progress, len(keys), desc="tokenize", unit="part")
    try:
        map_tasks(ex, tokenize.tokenize_partition,
                  {k: (str(layout.root), k, sha, strip, steps.tokenize_reads(layout, k, sha, strip)) for k in keys},
                  prefix=f"tokenize-{run_id}", retries=cfg.engine.retries, bar=bar, cost=("tokenize", str(layout.root)),
                  stored=_stored(cfg, layout), reads=lambda k: ("tokenizer", f"docs/part-{k}.parquet", "boilerplate/merged",
                                                                f"boilerplate/lines/part-{k}.parquet"),
                  clock=functools.partial(tl.tasks_ran, "tokenize"))
    finally:
        bar.close()
    clock.finish(inprocess=isinstance(ex, InProcessExecutor))
    return {"tokenize": {"partitions_run": len(keys)}}


def _materialize(ex: Executor, cfg: Config, layout: RunLayout, parts: list[Partition], tl: Timeline, *,
                 progress: bool) -> bool:
    """Shuffle the kept documents' tokens into shards (one task per tokenized partition), then pack and
    write each shard (one task per shard): ``lab.tokens.materialize``."""
    from lab.tokens import materialize

    if not steps.materialize_needed(cfg, layout, parts):
        return False
    clock = costs.Step(layout.root, "materialize")
    job = materialize.prepare(cfg, layout)
    materialize.start(layout)
    root = str(layout.root)
    run_id = _run_id(layout, cfg.config_hash(), job.sha256)
    dest = ex.broadcast((job.dest_doc, job.dest_batch))
    bar = _bar(progress, len(job.keys) + job.n_batches, desc="materialize", unit="task")
    try:
        cost = ("materialize", root)
        stored = _stored(cfg, layout)
        map_tasks(ex, materialize.scatter_partition,
                  {f"scatter-{k}": (root, k, job.sha256, dest, job.n_batches) for k in job.keys},
                  prefix=f"tokens-scatter-{run_id}", retries=cfg.engine.retries, bar=bar, cost=cost, stored=stored,
                  reads=lambda k: (f"tokenized/part-{k[8:]}.parquet",), clock=functools.partial(tl.tasks_ran, "materialize"))
        infos = map_tasks(ex, materialize.write_one_shard,
                          {f"{t.split}-{t.index}": (root, job.keys, t, job.dtype, job.eod, job.pad_id) for t in job.shards},
                          prefix=f"tokens-shard-{run_id}", retries=cfg.engine.retries, bar=bar, cost=cost, stored=stored,
                          reads=lambda k: (f"{materialize.staging(layout).name}/shuffle",),
                          clock=functools.partial(tl.tasks_ran, "materialize"))
    finally:
        bar.close()
    materialize.finish(cfg, layout, job, infos, steps.materialize_reads(cfg, layout, parts))
    clock.finish(inprocess=isinstance(ex, InProcessExecutor))
    return True
