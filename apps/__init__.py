"""apps: the Panel dashboard over one run. In: a run directory (``corpus-lab serve RUN``); out: a page
per browser session whose tabs judge every threshold.

``dashboard`` builds and serves the page; ``store`` is a session's selection (the thresholds and what
they select, read through ``lab.query``); ``views/`` holds one view per tab; ``dispatch`` runs queries
off the page's thread; ``format`` draws numbers and tables; ``workarounds`` holds what reaches past Panel's public API.
"""
