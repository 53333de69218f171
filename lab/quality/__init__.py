"""quality: what people and classifiers say about documents. In: labels given in the dashboard or a
notebook, model files on disk; out: label files, a trained classifier, each document's score.

``labels`` writes and compacts the label files; ``model`` finds, checks, loads and scores the three
kinds of classifier (fastText, ours, HuggingFace); ``train`` fits ours from the labels.
"""
