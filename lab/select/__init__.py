"""select: a config -> the ordered rules every document is judged by. In: a config and a run's merged
statistics; out: ``Rule`` lists (evaluated by ``lab.query`` in SQL or numpy, by ``Rule.passes`` in tests).

``rules`` is the rule as data; ``ruleset`` lists a config's rules in funnel order (percentile rules
resolved); ``knobs`` names every threshold a slider can move, and encodes them in a URL;
``calibrate`` proposes per-language thresholds from each language's own distributions.
"""
