"""text: what the stages share about a document's text: its language (``lang``: lid.176, computed by ``ftz``),
its words (``words``: datatrove's English split; ``segment``: every language, ICU for unspaced scripts) and its
stop words (``stopwords``). Text in, words and labels out; no stage, config or run directory here."""
