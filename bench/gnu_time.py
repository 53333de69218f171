"""A whole command under GNU time (``/usr/bin/time -v``): its result, wall seconds and peak RSS."""

from __future__ import annotations

import re
import subprocess


def gnu_time(cmd: list[str], env: dict | None = None) -> tuple[subprocess.CompletedProcess, float, float]:
    """(the finished command, wall seconds, maximum resident set size in MB) as GNU time reports them."""
    r = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, env=env)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", r.stderr).group(1)
    seconds = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall.split(":"))))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1)) / 1024
    return r, round(seconds, 2), round(rss, 1)
