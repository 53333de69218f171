"""lab.engine.map_tasks on the in-process executor: results in task order, retries then the error hook,
task handles as arguments of later tasks, progress reported from inside a task. (On Dask the same helper
runs every step of every run in test_engine.py and test_cluster.py.)"""

import pytest

from lab import engine


class Bar:
    """What map_tasks asks of a tqdm bar."""

    def __init__(self):
        self.n = 0

    def update(self, n):
        self.n += n


def test_results_come_in_task_order_with_one_step_per_task():
    bar = Bar()
    ex = engine.InProcessExecutor()
    out = engine.map_tasks(ex, lambda a, b: a * b, {"c": (2, 3), "a": (4, 5), "b": (1, 1)}, prefix="mul", bar=bar)
    assert out == [6, 20, 1] and bar.n == 3


def test_a_failing_task_is_retried_then_given_to_the_error_hook():
    calls = []

    def flaky(key, fails):
        calls.append(key)
        if calls.count(key) <= fails:
            raise OSError(f"attempt {calls.count(key)} of {key}")
        return key

    ex = engine.InProcessExecutor()
    out = engine.map_tasks(ex, flaky, {"ok": ("ok", 0), "late": ("late", 2), "bad": ("bad", 9)}, prefix="f", retries=2,
                           on_error=lambda key, e: f"quarantined {key}: {e}")
    # 1 + retries attempts at most: "late" succeeds on its third, "bad" never does
    assert out == ["ok", "late", "quarantined bad: attempt 3 of bad"]
    assert calls == ["ok", "late", "late", "late", "bad", "bad", "bad"]
    calls.clear()
    with pytest.raises(OSError, match="attempt 1 of bad"):  # without the hook the error stops the step
        engine.map_tasks(ex, flaky, {"bad": ("bad", 9)}, prefix="f")
    assert calls == ["bad"]


def test_handles_feed_later_tasks_and_reports_move_the_bar_within_a_task():
    ex = engine.InProcessExecutor()
    bar = Bar()

    def read(n, report):
        for _ in range(n):
            report(10)  # 10 bytes read
        return n

    sizes = {"a": 25, "b": 40}
    handles = engine.map_tasks(ex, read, {"a": (3,), "b": (4,)}, prefix="r", bar=bar, sizes=sizes, reports="topic",
                               gather=False)
    assert bar.n == 65  # reports beyond a task's size are not shown twice: each task counts its size once
    total = ex.result(ex.submit(lambda x, y: x + y, *handles, key="sum"))
    assert total == 7


def test_only_the_engine_imports_dask():
    """The steps, the manifest and the task functions run without Dask (DESIGN §3: engine.py is the
    only module that touches it)."""
    import subprocess
    import sys

    code = ("import sys; import lab.steps, lab.manifest, lab.annotate, lab.dedup, lab.tokens.tokenize, lab.tokens.materialize; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'dask', 'distributed'}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"
