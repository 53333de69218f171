"""Each kind of error, reached the way a user reaches it: through ``corpus-lab`` (``lab.cli.main``), with
its exit status and a one-line message naming the file or key and the fix.

2 bad input (``ConfigError``), 3 run state (``RunStateError``/``NotReadyError``), 4 integrity
(``IntegrityError``). The integrity cases damage a copy of the session's tokenized run (``tokens_run``:
the synthetic sample, one partition, shards of 64 sequences of 512 tokens).
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from pathlib import Path

import pytest

from lab import cli, sample
from lab.config import load, save
from lab.errors import ConfigError, IntegrityError, LabError, NotReadyError, RunStateError, StoreUnreachableError
from lab.io.run import RunLayout


def corpus_lab(capsys, *args: str) -> tuple[int, str]:
    """Run ``corpus-lab ARGS`` in this process: (exit status, the error line)."""
    capsys.readouterr()
    code = cli.main([str(a) for a in args])
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("corpus-lab: error: ")]
    assert code == 0 or len(err) == 1, err  # one line, whatever the message
    return code, err[0] if err else ""


@pytest.fixture
def tokens_copy(tokens_run, tmp_path) -> Path:
    """A copy of the session's tokenized run that a test may damage (mtimes kept: a rerun reuses it)."""
    return Path(shutil.copytree(tokens_run.run_dir, tmp_path / "runs" / "tokens"))


@pytest.fixture(scope="module")
def untokenized_run(tmp_path_factory) -> Path:
    """A run of 12 documents with tokenizer.enabled: false: signals, no token counts, no shards, no labels."""
    root = tmp_path_factory.mktemp("untokenized")
    rng = random.Random(5)
    (root / "in.jsonl").write_text("".join(json.dumps({"id": str(i), "text": sample.english_doc(rng)}) + "\n"
                                           for i in range(12)))
    (root / "c.yaml").write_text(f"name: u\noutput_dir: {root}/runs\ninputs: [{{path: {root}/in.jsonl}}]\n"
                                 "tokenizer: {enabled: false}\nengine: {n_workers: 1}\n")
    assert cli.main(["run", "--config", str(root / "c.yaml"), "--no-progress", "--in-process"]) == 0
    return root / "runs" / "u"


# --- the classes ------------------------------------------------------------------------------------


def test_each_class_is_a_lab_error_with_its_exit_status():
    assert issubclass(NotReadyError, RunStateError) and issubclass(IntegrityError, LabError)
    assert not issubclass(NotReadyError, ConfigError) and not issubclass(IntegrityError, ConfigError)
    codes = {cls: cli.exit_code(cls("x")) for cls in (ConfigError, RunStateError, NotReadyError, IntegrityError,
                                                      StoreUnreachableError)}
    assert codes == {ConfigError: 2, RunStateError: 3, NotReadyError: 3, IntegrityError: 4, StoreUnreachableError: 6}
    assert len(set(code for _, code in cli.EXIT_CODES) | {cli.EXIT_FAILED, cli.EXIT_INTERRUPTED}) == 7


# --- 2: bad input ------------------------------------------------------------------------------------


def test_a_misspelt_key_exits_2_naming_the_key_the_known_ones_and_the_fix(tmp_path, capsys):
    (tmp_path / "c.yaml").write_text("stages: {gopher_quality: {min_wrds: 10}}\n")
    code, err = corpus_lab(capsys, "run", "--config", tmp_path / "c.yaml", "--dry-run")
    assert code == 2, err
    assert f"{tmp_path / 'c.yaml'}: " in err and "unknown key 'min_wrds' at stages.gopher_quality" in err
    assert "known keys: enabled, min_words" in err and "Fix the spelling or remove the key" in err


def test_a_config_that_is_not_yaml_is_one_line(tmp_path, capsys):
    (tmp_path / "c.yaml").write_text("stages: {gopher_quality: {min_words: 10}\n")  # an unclosed brace
    code, err = corpus_lab(capsys, "run", "--config", tmp_path / "c.yaml", "--dry-run")
    assert code == 2 and "c.yaml is not valid YAML" in err and "line 2" in err, err


# --- 3: run state ------------------------------------------------------------------------------------


def test_the_loader_on_a_run_without_tokens_exits_3_naming_the_step(untokenized_run, capsys):
    code, err = corpus_lab(capsys, "verify-tokens", untokenized_run)
    assert code == 3, err
    assert f"{untokenized_run}/tokens/train holds no token shards (manifest.json is missing)" in err
    assert "run `corpus-lab run` with tokenizer.enabled: true" in err and err.endswith("first")


def test_training_without_labels_exits_3_naming_the_fix(untokenized_run, capsys):
    code, err = corpus_lab(capsys, "train-quality", untokenized_run)
    assert code == 3 and f"no positives: {untokenized_run} has no documents labelled good" in err, err
    assert "label some in the dashboard (corpus-lab serve) first, or pass --positives INPUT" in err


def test_token_tables_of_a_run_without_them_say_which_command_makes_them(untokenized_run):
    from lab import query

    with pytest.raises(NotReadyError, match=r"has no token counts \(tokenized/\); run `corpus-lab run` with "
                                            "tokenizer.enabled: true first"):
        query.fertility(untokenized_run)
    with pytest.raises(NotReadyError, match=r"stats/fertility.parquet does not exist: run `corpus-lab fertility "):
        query.fertility_comparison(untokenized_run)
    with pytest.raises(NotReadyError, match="has no packing table"):
        query.packing(untokenized_run)


def test_the_dashboard_tab_shows_what_to_run_first(untokenized_run):
    """The Fertility & packing tab catches LabError and shows its message: each table says what makes it."""
    from apps.store import Selection
    from apps.views import tokens

    sel = Selection(untokenized_run)
    for title, table in tokens.TABLES:
        with pytest.raises(NotReadyError, match="first") as e:
            table(sel)
        assert isinstance(e.value, LabError), title


def test_a_run_that_never_annotated_exits_3_and_a_wrong_path_2(untokenized_run, tmp_path, capsys):
    started = tmp_path / "started"  # a run stopped before its first partition: config.yaml, no signals
    started.mkdir()
    shutil.copy(untokenized_run / "config.yaml", started / "config.yaml")
    code, err = corpus_lab(capsys, "funnel", started)
    assert code == 3 and "has no signals yet" in err and f"corpus-lab run --config {started}/config.yaml" in err, err
    code, err = corpus_lab(capsys, "funnel", tmp_path / "nowhere")
    assert code == 2 and "is not a run directory (no config.yaml)" in err, err


# --- 4: integrity ------------------------------------------------------------------------------------


def test_a_tampered_tokenizer_exits_4_naming_the_file_both_hashes_and_the_fix(tokens_copy, capsys):
    layout = RunLayout(tokens_copy)
    want = json.loads(layout.tokenizer_fit.read_text())["sha256"]
    layout.tokenizer_json.write_text(layout.tokenizer_json.read_text().replace('"Ġthe"', '"Ġthe_"', 1))
    # new thresholds over the same run: it repacks the kept documents with the run's (now changed) tokenizer
    cfg = load(layout.config)
    stricter = dataclasses.replace(cfg.stages.gopher_quality, min_words=cfg.stages.gopher_quality.min_words + 20)
    cfg = dataclasses.replace(cfg, output_dir=str(tokens_copy.parent),
                              stages=dataclasses.replace(cfg.stages, gopher_quality=stricter))
    save(cfg, tokens_copy.parent / "stricter.yaml")
    code, err = corpus_lab(capsys, "run", "--config", tokens_copy.parent / "stricter.yaml", "--no-progress",
                           "--in-process")
    assert code == 4, err
    assert f"{layout.tokenizer_json} has sha256 " in err and f"the run recorded {want[:16]}… in {layout.tokenizer_fit}" in err
    assert "restore the original tokenizer.json" in err and f"remove {layout.tokenizer_dir} and rerun" in err
    assert json.loads((layout.tokens / "train" / "manifest.json").read_text())["config_hash"] != cfg.config_hash()


def test_a_truncated_shard_exits_4_naming_the_file_and_the_fix(tokens_copy, capsys):
    shard = tokens_copy / "tokens" / "train" / "shard-00000.bin"
    shard.write_bytes(shard.read_bytes()[:-1000])
    code, err = corpus_lab(capsys, "verify-tokens", tokens_copy)
    assert code == 4, err
    assert f"{shard} holds " in err and "the manifest says 64 x 512: the shard is truncated" in err
    assert "rerun `corpus-lab run` with the same config to rewrite the split (or restore the file)" in err


@pytest.mark.parametrize("damage", ["truncated", "empty", "wrong length"])
def test_a_damaged_shard_index_exits_4(tokens_copy, capsys, damage):
    import numpy as np

    offsets = tokens_copy / "tokens" / "train" / "shard-00000.offsets.npy"
    if damage == "truncated":
        offsets.write_bytes(offsets.read_bytes()[:100])
    elif damage == "empty":
        offsets.write_bytes(b"")
    else:
        np.save(offsets, np.load(offsets)[:-1])
    code, err = corpus_lab(capsys, "verify-tokens", tokens_copy)
    assert code == 4 and f"{offsets}" in err and "rewrite the split (or restore the file)" in err, err
    if damage == "wrong length":
        assert "has 64 entries, the manifest says 64 sequences (+1)" in err


def test_a_manifest_that_does_not_parse_exits_4_naming_it(tokens_copy, capsys):
    manifest = tokens_copy / "tokens" / "train" / "manifest.json"
    manifest.write_text(manifest.read_text()[:50])
    code, err = corpus_lab(capsys, "verify-tokens", tokens_copy)
    assert code == 4 and f"{manifest} is not valid JSON" in err and "restore the file" in err, err
    manifest.write_text(json.dumps({"format_version": 9}))
    code, err = corpus_lab(capsys, "verify-tokens", tokens_copy)
    assert code == 4 and "token shard format 9, this corpus-lab reads format 1" in err, err


def test_a_damaged_done_marker_is_redone_by_a_rerun(tokens_copy, capsys):
    """A rerun is the fix an integrity message gives: a damaged marker means the step runs again."""
    layout = RunLayout(tokens_copy)
    fit = layout.tokenizer_fit.read_text()
    (tokens_copy / "dedup" / "done.json").write_text("{")
    cfg = dataclasses.replace(load(layout.config), output_dir=str(tokens_copy.parent))
    save(cfg, tokens_copy.parent / "same.yaml")
    code, err = corpus_lab(capsys, "run", "--config", tokens_copy.parent / "same.yaml", "--no-progress",
                           "--in-process")
    assert code == 0, err
    assert json.loads((tokens_copy / "dedup" / "done.json").read_text())["state"]
    assert layout.tokenizer_fit.read_text() == fit  # what does not depend on near dedup is reused
