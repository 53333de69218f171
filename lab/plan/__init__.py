"""plan: what the next run costs. In: a run's funnel, step costs and token counts; out: answers in
tokens, bytes, cores, hours and money.

``costs`` reads each step's CPU and wall seconds; ``throughput`` turns a token target into raw bytes,
cores and bandwidth (the dashboard's Planner tab); ``fertility`` compares tokenizers by tokens per
word and what each vocabulary costs the model.
"""
