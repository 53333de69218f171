"""corpus-lab: annotate once, select many times, materialize once."""

__version__ = "0.1.0"
