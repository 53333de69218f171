"""Exit 0 when a wheel whose name starts with argv[1] lies in one of pip's find-links directories (its config
or PIP_FIND_LINKS), 1 otherwise: whether pip can install it without an index that carries it."""

import glob
import os
import subprocess
import sys

links = os.environ.get("PIP_FIND_LINKS", "").split()
listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
for line in listed.splitlines():
    key, _, value = line.partition("=")
    if key.endswith("find-links"):
        links += value.strip("'\"").split()
found = any(glob.glob(os.path.join(link.removeprefix("file://"), glob.escape(sys.argv[1]) + "*.whl")) for link in links)
sys.exit(0 if found else 1)
