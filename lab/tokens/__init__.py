"""tokens: the kept documents -> training tokens, and back. In: a run's ``docs/`` and its selection;
out: ``tokenizer/``, ``tokenized/`` and ``tokens/SPLIT/`` shards a trainer reads.

``tokenize`` fits (or loads) the run's tokenizer and counts every document's tokens (``fast_encode``:
the same ids through tiktoken's encoder; ``tokenizer_source``: an existing tokenizer named by path);
``materialize`` orders the kept documents (``splits``), applies the token budgets (``mixture``), packs
them into sequences (``pack``) and writes shards (``shards``); ``loader`` reads them back exactly once
per epoch, ``export`` writes Megatron's format, ``provenance`` maps a token to its document.
"""
