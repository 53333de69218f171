"""One way for every tab to compute off the server's event loop and show the answer on it.

A tab asks ``Dispatch.submit(kind, compute, show)``: ``compute`` runs on a thread of the process's
query pool (DuckDB releases the GIL while it works), and ``show`` applies the answer on the
session's event loop, every change in one message. A request overtaken by a later one of the same
``kind`` in the same session is dropped: its answer is not shown and, if it has not started yet,
not computed. Outside a server (a notebook, a test) ``compute`` runs inline.

Two pools, shared by every session of the process: the numbers (funnels, histograms) and the
details (documents, clusters, plans), which wait a little for the numbers in flight so that one
session's documents do not delay another session's funnel.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

import panel as pn
from panel.io.state import set_curdoc

from apps import workarounds

AFTER_WAIT_S = 1.0  # how long detail work waits for the numbers in flight, at most
_SKIPPED = object()  # a request overtaken before it started


class Pool:
    """Query threads that count their work in flight (``quiet`` is set when there is none)."""

    def __init__(self, workers: int, name: str, *, after: Pool | None = None) -> None:
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self.after = after  # a pool whose work goes first: wait (a while) until it is quiet
        self.lock, self.running, self.quiet = threading.Lock(), 0, threading.Event()
        self.quiet.set()
        self.last = time.monotonic()  # when work was last submitted or finished

    def submit(self, fn: Callable[[], Any]) -> Future:
        with self.lock:
            self.running += 1
            self.quiet.clear()
            self.last = time.monotonic()
        fut = self.executor.submit(self._run, fn)
        fut.add_done_callback(self._finished)
        return fut

    def _run(self, fn: Callable[[], Any]) -> Any:
        if self.after is not None:
            self.after.quiet.wait(timeout=AFTER_WAIT_S)
        return fn()

    def _finished(self, _: Future) -> None:
        with self.lock:
            self.running -= 1
            self.last = time.monotonic()
            if not self.running:
                self.quiet.set()


NUMBERS = Pool(4, "corpus-lab-numbers")
DETAILS = Pool(2, "corpus-lab-details", after=NUMBERS)
POOLS = (NUMBERS, DETAILS)


def collect_when_idle(every_s: float = 15.0, idle_s: float = 1.0, at_most_s: float = 60.0) -> threading.Thread:
    """Full garbage collections only while no work is in flight (a server calls this once).

    A full collection stops the process for 50-150 ms, and the allocations that trigger one come from
    answering: left to itself it lands inside a slider's answer. Here the automatic ones are switched
    off (the young generations still collect as usual) and a thread runs one every ``every_s`` once
    both pools have been quiet for ``idle_s`` (or, on a server never idle, ``at_most_s`` after the last).
    """
    gc.set_threshold(*gc.get_threshold()[:2], 1_000_000_000)  # the oldest generation: never on its own

    def loop() -> None:
        last = time.monotonic()
        while True:
            time.sleep(every_s)
            now = time.monotonic()
            if all(p.quiet.is_set() and now - p.last >= idle_s for p in POOLS) or now - last >= at_most_s:
                gc.collect()
                last = time.monotonic()

    t = threading.Thread(target=loop, name="corpus-lab-gc", daemon=True)
    t.start()
    return t


class Dispatch:
    """One session's requests: the latest of each kind is computed on a pool and shown on the loop."""

    def __init__(self, doc=None) -> None:
        self.doc = doc if doc is not None else pn.state.curdoc
        self.generation: dict[str, int] = {}
        # work asked while the page is being built waits until the browser has loaded it: an answer that
        # comes back while the server is still making the session (a fast query) could otherwise be lost
        # with the callback that shows it (seen: a new page's histograms never drawn, about 1 load in 5)
        self.waiting: dict[str, tuple] | None = None
        self._watch = None
        if self.served:
            self.waiting = {}
            pn.state.onload(self._loaded)
            # Panel can drop an onload callback registered while it is running the session's others (its
            # list is popped, then the page marked loaded): the page would never show its first answers.
            # Until ours has run, check twice a second whether Panel has marked the page loaded.
            self._watch = self.doc.add_periodic_callback(self._loaded_if_missed, 500)

    def _loaded(self) -> None:
        waiting, self.waiting = self.waiting or {}, None
        for kind, (compute, show, pool) in waiting.items():
            self.submit(kind, compute, show, pool=pool)

    def _loaded_if_missed(self) -> None:
        if self.waiting is not None and workarounds.page_loaded(self.doc):  # loaded, and our callback never ran
            self._loaded()
        if self.waiting is None and self._watch is not None:
            self.doc.remove_periodic_callback(self._watch)
            self._watch = None

    @property
    def served(self) -> bool:
        return self.doc is not None and self.doc.session_context is not None

    def submit(self, kind: str, compute: Callable[[], Any], show: Callable[[Future], None], *,
               pool: Pool | None = None) -> None:
        if self.waiting is not None:  # the page is not loaded yet: the latest request of each kind, then
            self.waiting[kind] = (compute, show, pool)
            return
        gen = self.generation[kind] = self.generation.get(kind, 0) + 1
        if not self.served:
            show(done(compute))
            return

        def run():
            return _SKIPPED if gen != self.generation[kind] else compute()

        def ready(fut: Future) -> None:
            ctx = self.doc.session_context
            if ctx is None or ctx.destroyed:  # the page was closed (or never connected): no one to show
                return
            if gen == self.generation[kind]:  # the one thread-safe way into a Bokeh document
                self.doc.add_next_tick_callback(partial(self._show, kind, gen, fut, show))

        (pool or NUMBERS).submit(run).add_done_callback(ready)

    def _show(self, kind: str, gen: int, fut: Future, show: Callable[[Future], None]) -> None:
        if gen != self.generation[kind] or (fut.exception() is None and fut.result() is _SKIPPED):
            return
        with set_curdoc(self.doc), pn.io.hold(self.doc):  # every change in one message
            show(fut)


def done(compute: Callable[[], Any]) -> Future:
    """A finished future holding ``compute()`` or the exception it raised."""
    fut: Future = Future()
    try:
        fut.set_result(compute())
    except Exception as e:  # noqa: BLE001 - handed to the caller through the future
        fut.set_exception(e)
    return fut


class WhenShown:
    """Work a tab needs only while it is shown: done now when it is, else once, when it is opened.

    A hidden tab does not recompute on every slider release (its answer would be stale before anyone
    reads it); the latest pending refresh runs when the user opens it. ``is_shown`` is set by the page
    that holds the tab (outside one, a tab counts as shown).
    """

    def __init__(self, is_shown: Callable[[], bool] | None = None) -> None:
        self.is_shown: Callable[[], bool] = is_shown or (lambda: True)
        self.pending: Callable[[], None] | None = None

    def run(self, fn: Callable[[], None]) -> None:
        if self.is_shown():
            self.pending = None
            fn()
        else:
            self.pending = fn

    def opened(self) -> None:
        fn, self.pending = self.pending, None
        if fn is not None:
            fn()
