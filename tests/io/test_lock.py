"""One writer per run directory (lab.io.lock): a second one is refused at once, naming the first."""

import os
import signal
import subprocess
import sys

import pytest

from lab.errors import RunStateError
from lab.io.lock import NAME, RunLock


def test_a_second_writer_is_refused_naming_the_holder(tmp_path):
    root = tmp_path / "run"
    with RunLock(root):
        (root / "signals").mkdir()
        with pytest.raises(RunStateError) as e:
            with RunLock(root):
                pass
        assert f"process {os.getpid()} on " in str(e.value) and "another --output-dir" in str(e.value)
    assert (root / NAME).read_bytes() == b""  # a finished run's files do not depend on who wrote them
    with RunLock(root):  # free again
        pass


def test_a_run_that_wrote_nothing_leaves_no_directory(tmp_path):
    root = tmp_path / "never"
    with pytest.raises(ValueError):
        with RunLock(root):
            raise ValueError("the run could not start")
    assert not root.exists()


def test_a_killed_holder_lets_go(tmp_path):
    # the lock is the kernel's: a holder killed with SIGKILL (no cleanup at all) does not leave it held
    root = tmp_path / "run"
    code = (f"import sys, time; from lab.io.lock import RunLock; l = RunLock({str(root)!r}).__enter__(); "
            f"open({str(root / 'part')!r}, 'w').close(); print('held', flush=True); time.sleep(600)")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(RunStateError, match=f"process {p.pid} on "):
            with RunLock(root):
                pass
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    with RunLock(root):
        pass
