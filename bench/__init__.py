"""corpus-lab's benchmarks: ``python -m bench --list``, ``python -m bench NAME [ARGS ...]`` (see bench/run.py)."""
