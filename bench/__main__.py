"""``python -m bench NAME [ARGS ...]``: bench/run.py's entry point (run from the repository root)."""

from .run import main

main(prog="python -m bench")
