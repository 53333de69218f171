"""tokens: the tokenizer's stratified sample, token counts, fertility and packing tables of a run.

The sample a run's tokenizer is fitted on is drawn in SQL from the documents a config keeps for
training; fertility joins the token counts (``tokenized/``) with the signals and texts. The
tokenizer comparison (``stats/fertility.parquet``) and the packing table (``stats/packing.json``)
are read as the run wrote them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from lab.config import Config
from lab.errors import ConfigError, NotReadyError
from lab.io.writers import read_json
from lab.query.compile import codes_sql, rules_of
from lab.query.neardup import with_near
from lab.query.run import GROUP_BY, Run, open_run
from lab.query.sql import ident, quote, to_arrow
from lab.tokens.splits import order_and_splits


def tokenizer_sample(run: str | Path | Run, config: Config) -> tuple[list[str], pl.DataFrame]:
    """The texts a run's tokenizer is fitted on, and the strata they came from.

    Among the documents ``config`` keeps for training (the validation split left out), each (lang, source) stratum's share of the kept bytes over
    the whole run decides its share of ``tokenizer.sample_bytes``; inside a stratum documents are
    taken in the order of a seeded hash of their doc_id (md5: stable across DuckDB versions) until
    the quota is reached (the document that crosses it is included). Partitioning plays no part.
    """
    r = open_run(run)
    rules = rules_of(r, config)
    tc = config.tokenizer
    cur = r.cursor()
    codes = with_near(r, cur, rules, codes_sql(rules, extra=["lang", "source"], run=r))
    # the validation and test documents never train the tokenizer: the split of the kept documents first
    # (materialize's, from pack.shuffle_seed, pack.val_fraction and pack.test_fraction), then the sample of the rest
    kept = np.sort(to_arrow(cur.sql(f"SELECT doc_id FROM ({codes}) WHERE code IS NULL")).column("doc_id").to_numpy())
    order, which = order_and_splits(kept, config.pack.shuffle_seed, config.pack.val_fraction, config.pack.test_fraction)
    cur.register("_val", pa.table({"doc_id": pa.array(kept[order[which != 0]], pa.int64())}))
    sql = (f"WITH k AS (SELECT doc_id, coalesce(lang, '') AS lang, source, bytes, "
           f"md5(doc_id::VARCHAR || ':' || {int(tc.seed)}) AS h FROM ({codes}) WHERE code IS NULL "
           f"AND doc_id NOT IN (SELECT doc_id FROM _val)), "
           f"tot AS (SELECT lang, source, sum(bytes) AS stratum_bytes FROM k GROUP BY ALL), "
           f"q AS (SELECT lang, source, stratum_bytes, {int(tc.sample_bytes)} * stratum_bytes / "
           f"(SELECT sum(stratum_bytes) FROM tot) AS quota FROM tot), "
           f"ranked AS (SELECT k.*, q.quota, sum(k.bytes) OVER (PARTITION BY k.lang, k.source ORDER BY k.h, k.doc_id "
           f"ROWS UNBOUNDED PRECEDING) - k.bytes AS before FROM k JOIN q USING (lang, source)) "
           f"SELECT doc_id, lang, source, bytes FROM ranked WHERE before < quota ORDER BY lang, source, h, doc_id")
    picked = cur.sql(sql).pl()
    cur.register("_picked", picked.select("doc_id").to_arrow())
    texts = dict(cur.execute("SELECT doc_id, text FROM docs WHERE doc_id IN (SELECT doc_id FROM _picked)").fetchall())
    strata = cur.sql(f"SELECT lang, source, count(*) AS docs, sum(bytes)::BIGINT AS bytes FROM ({sql}) GROUP BY ALL "
                     "ORDER BY lang, source").pl()
    return [texts[d] for d in picked["doc_id"]], strata


def token_counts(run: str | Path | Run) -> pl.DataFrame:
    """doc_id, n_tokens, words, continued_words of every tokenized document."""
    r = open_run(run)
    files = r.layout.tokenized_dir / "part-*.parquet"
    if not any(r.layout.tokenized_dir.glob("part-*.parquet")):
        raise NotReadyError(f"{r.layout.root} has no token counts (tokenized/); run `corpus-lab run` with "
                            "tokenizer.enabled: true first")
    return r.cursor().sql(f"SELECT doc_id, n_tokens, words, continued_words FROM read_parquet({quote(str(files))}) "
                          "ORDER BY doc_id").pl()


def fertility(run: str | Path | Run, by: str = "lang", config: Config | None = None) -> pl.DataFrame:
    """Tokenizer fertility per language or source: documents, words, tokens, tokens per word, bytes
    and characters per token, and the share of words cut into more than one token (continued words).

    Words are separated by ASCII whitespace, so tokens per word and continued words mean little for
    languages written without spaces (Chinese, Japanese, Thai): read bytes or characters per token
    there. With ``config``, only the documents it keeps are counted.
    """
    if by not in GROUP_BY:
        raise ConfigError(f"fertility by={by!r} is not allowed: must be one of {', '.join(GROUP_BY)}")
    r = open_run(run)
    token_counts(r)  # a clear error when the run has none
    if config is None:  # reads every text: remembered per opened run (sessions of a dashboard share it)
        key = ("fertility", by)
        if key not in r.constant:
            r.constant[key] = _fertility(r, by, None)
        return r.constant[key]
    return _fertility(r, by, config)


def _fertility(r: Run, by: str, config: Config | None) -> pl.DataFrame:
    cur = r.cursor()
    tok = f"read_parquet({quote(str(r.layout.tokenized_dir / 'part-*.parquet'))})"
    keep = ""
    if config is not None:
        rules = rules_of(r, config)
        cur.register("_kept", to_arrow(cur.sql(f"SELECT doc_id FROM ({with_near(r, cur, rules, codes_sql(rules, run=r))}) "
                                             "WHERE code IS NULL")))
        keep = "WHERE t.doc_id IN (SELECT doc_id FROM _kept)"
    return cur.sql(
        f"SELECT s.{ident(by)}, count(*) AS documents, sum(t.words)::BIGINT AS words, sum(t.n_tokens)::BIGINT AS tokens, "
        f"sum(t.n_tokens) / nullif(sum(t.words), 0) AS tokens_per_word, "
        f"sum(strlen(d.text)) / nullif(sum(t.n_tokens), 0) AS bytes_per_token, "
        f"sum(length(d.text)) / nullif(sum(t.n_tokens), 0) AS chars_per_token, "
        f"sum(t.continued_words) / nullif(sum(t.words), 0) AS continued_words "
        f"FROM {tok} t JOIN signals s USING (doc_id) JOIN docs d USING (doc_id) {keep} "
        f"GROUP BY ALL ORDER BY tokens DESC, 1").pl()


def fertility_comparison(run: str | Path | Run) -> pl.DataFrame:
    """The tokenizer comparison ``corpus-lab fertility`` stored (``stats/fertility.parquet``): fitted
    vocabulary sizes and offline reference tokenizers x (all, lang, source), with V x d beside each."""
    r = open_run(run)
    p = r.layout.fertility[1]
    if not p.exists():
        raise NotReadyError(f"{p} does not exist: run `corpus-lab fertility {r.layout.root}` first")
    return r.cursor().sql(f"SELECT * FROM read_parquet({quote(str(p))})").pl()


def packing(run: str | Path | Run) -> pl.DataFrame:
    """Every packing strategy x seq_len on the run's train split (``stats/packing.json``): sequences,
    utilization, padding, tokens truncated, documents split, fragments per document."""
    r = open_run(run)
    p = r.layout.packing_stats
    if not p.exists():
        raise NotReadyError(f"{r.layout.root} has no packing table ({p}); run `corpus-lab run` with "
                            "tokenizer.enabled: true first")
    rows = [{"strategy": k.split("@")[0], "seq_len": int(k.split("@")[1]), **v} for k, v in read_json(p)["train"].items()]
    return pl.DataFrame(rows).sort("strategy", "seq_len")


def loader_telemetry(run: str | Path | Run) -> pl.DataFrame:
    """Every loader telemetry the run holds (``telemetry/NAME.json``, newest first): name, steps, p50_ms,
    p99_ms, max_ms, mean_ms, stalls, stall_ms, prefetch, rank, worker_id, epoch."""
    r = open_run(run)
    files = sorted(r.layout.telemetry.glob("*.json"), key=lambda f: (-f.stat().st_mtime_ns, f.name))
    rows = [{"name": f.stem, **{k: v for k, v in read_json(f).items() if k != "window"}} for f in files]
    if not rows:
        raise NotReadyError(f"{r.layout.telemetry} holds no loader telemetry: run `corpus-lab read-tokens "
                            f"{r.layout.root}` (or write_telemetry from a trainer's TokenLoader) first")
    return pl.DataFrame(rows)


def telemetry_steps(run: str | Path | Run, name: str) -> pl.DataFrame:
    """One telemetry's per-step waits: step, wait_ms, stall (``telemetry/NAME.parquet``)."""
    r = open_run(run)
    p = r.layout.telemetry / f"{name}.parquet"
    if not p.exists():
        raise NotReadyError(f"{p} does not exist; the run's telemetries: "
                            f"{', '.join(f.stem for f in r.layout.telemetry.glob('*.parquet')) or 'none'}")
    return r.cursor().sql(f"SELECT step, wait_ms, stall FROM read_parquet({quote(str(p))}) ORDER BY step").pl()
