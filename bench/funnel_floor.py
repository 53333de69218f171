"""Where the time of a cold funnel goes: the cost of each rule's predicate, and one restructuring.

On the same rows as ``bench/funnel_query.py`` (N rows resampled from a real run's signals, 15% of
them exact copies of 5% of the others, opened in memory as the dashboard does):

- ``cold``: ``lab.query``'s funnel counts with every rule evaluated on every row;
- ``predicates``: each rule's failure condition alone, as one ``CASE`` summed over all rows,
  minus an empty scan of the same shape (ms per 1M rows on this machine's cores), and the
  language rule on ``lang`` cast to an ``ENUM`` of the run's languages;
- ``split``: the rows of single-member hash groups and of multi-member groups held in two tables,
  so that only the second needs the exact-dedup step: the CASE over the first, and the CASE plus
  the dedup by aggregation (lowest ``doc_id`` per hash among survivors) over the second. Its
  counts are checked equal to ``lab.query``'s.

    .venv/bin/python bench/funnel_floor.py --rows 1000000      # -> bench/out/funnel_floor.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from funnel_query import write_run

from lab import query
from lab.config import Config
from lab.query.compile import failure_in
from lab.query.funnels import sql_counts
from lab.query.neardup import without_near
from lab.query.sql import quote


def median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return round(1000 * statistics.median(times), 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--from-run", default="runs/sample")
    ap.add_argument("--out", type=Path, default=Path("bench/out/funnel_floor.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = query.open_run(write_run(Path(tmp) / "run", args.rows, args.from_run).root, in_memory=True)
        cur = run.cursor()
        rules = without_near(query.rules_of(run, Config()))
        group = next(i for i, r in enumerate(rules) if r.op == "first_in_group")
        if any(r.op not in ("first_in_group", "first_in_cluster") for r in rules[group:]):
            raise SystemExit("this probe expects every scalar rule before the exact-dedup rule (the default order)")
        scalar = [(i, f) for i, r in enumerate(rules[:group]) if (f := failure_in(r, run)) is not None]
        reference = sql_counts(cur, rules, None, run)
        res: dict = {"rows": args.rows, "rules": len(rules), "predicates_evaluated": len(scalar),
                     "cold_ms": median_ms(lambda: sql_counts(cur, rules, None, run), args.repeat)}

        def case_ms(cond: str, table: str = "signals") -> float:
            return median_ms(lambda: cur.execute(f"SELECT sum(CASE WHEN {cond} THEN 1 END) FROM {table}").fetchall(),
                             args.repeat)

        empty = case_ms('"doc_id" IS NULL')
        res["empty_scan_ms"] = empty
        res["predicate_ms"] = {f: round(case_ms(f) - empty, 1) for _, f in scalar}
        langs = [v for (v,) in cur.execute("SELECT DISTINCT lang FROM signals WHERE lang IS NOT NULL ORDER BY 1").fetchall()]
        cur.execute(f"CREATE TYPE probe_langs AS ENUM ({', '.join(map(quote, langs))})")
        cur.execute("CREATE TABLE probe_enum AS SELECT * REPLACE (lang::probe_langs AS lang) FROM signals")
        lang_rule = next(f for _, f in scalar if f.startswith('("lang" IS NULL'))
        res["predicate_ms_lang_enum"] = round(case_ms(lang_rule, "probe_enum") - empty, 1)

        multi = 'coalesce("_n_content_hash" > 1, FALSE)'
        cur.execute(f"CREATE TABLE probe_single AS SELECT * FROM signals WHERE NOT {multi}")
        cur.execute(f"CREATE TABLE probe_multi AS SELECT * FROM signals WHERE {multi}")
        case = "CASE " + " ".join(f"WHEN {f} THEN {i}" for i, f in scalar) + " END"
        single = (f"SELECT code, count(*) AS n, sum(bytes) AS b FROM (SELECT bytes, CASE WHEN c IS NULL AND content_hash IS NULL "
                  f"THEN {group} ELSE c END AS code FROM (SELECT bytes, content_hash, {case} AS c FROM probe_single)) GROUP BY ALL")
        groups = "SELECT arg_min(bytes, doc_id) AS kb, count(*) AS n, sum(bytes) AS b FROM x WHERE c IS NULL GROUP BY content_hash"
        dup = (f"SELECT * FROM (WITH x AS MATERIALIZED (SELECT doc_id, bytes, content_hash, {case} AS c FROM probe_multi) "
               f"SELECT c AS code, count(*) AS n, sum(bytes) AS b FROM x WHERE c IS NOT NULL GROUP BY c "
               f"UNION ALL SELECT NULL, count(*), sum(kb) FROM ({groups}) "
               f"UNION ALL SELECT {group}, sum(n) - count(*), sum(b) - sum(kb) FROM ({groups}))")
        both = f"SELECT code, sum(n), sum(b) FROM ({single} UNION ALL {dup}) GROUP BY ALL"
        got = {(None, code): [int(n), int(b), 0] for code, n, b in cur.execute(both).fetchall() if n}
        if got != reference:
            raise SystemExit(f"split tables: counts differ from lab.query's\n{got}\n{reference}")
        res["split"] = {"rows_single": cur.execute("SELECT count(*) FROM probe_single").fetchone()[0],
                        "rows_multi": cur.execute("SELECT count(*) FROM probe_multi").fetchone()[0],
                        "single_ms": median_ms(lambda: cur.execute(single).fetchall(), args.repeat),
                        "multi_with_dedup_ms": median_ms(lambda: cur.execute(dup).fetchall(), args.repeat),
                        "total_ms": median_ms(lambda: cur.execute(both).fetchall(), args.repeat)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
