"""dedup: exact and near duplicates across partitions. In: each partition's content hashes and MinHash
band records (written by annotate); out: ``dedup/exact/``, ``dedup/edges/`` and the clusters. No Dask here.

- ``signature``: one document's MinHash signature of its word shingles (the near_dedup stage's signals);
- ``shuffle``: the LSH shuffle: map (``band_groups``) and reduce (``reduce_bucket``: candidate pairs);
- ``graph``: connected components and spanning forests of the candidate pairs;
- ``forest``: the reduce tasks' forests merged, and the clusters at every threshold of ``GRID``;
- ``keep``: one member kept per group of surviving near-duplicates;
- ``compare``: what a person judges a pair by: a word diff, the exact Jaccard;
- ``recall``: the LSH S-curve: the pair recall at a threshold, the bands x rows for a lowest threshold.

The stages are ``lab.stages.exact_dedup`` and ``lab.stages.near_dedup``; ``lab.query`` applies the rules.
"""

from lab.dedup.compare import diff, text_jaccard
from lab.dedup.forest import (
           EPS,
           GRID,
           Forest,
           grid_clusters,
           grid_column,
           merge_forests,
           spanning_forest,
           write_clusters,
)
from lab.dedup.keep import KEEP, cluster_keepers, keep_one_per_cluster, rank_of
from lab.dedup.recall import bands_rows, lowest_threshold, recall_at, s_curve, s_curve_points
from lab.dedup.shuffle import BAND_SCHEMA, EDGE_SCHEMA, EXACT, EXACT_SCHEMA, band_groups, reduce_bucket, write_bands
from lab.dedup.signature import normalize, shingle_hash, shingle_hashes, shingle_text, shingles

__all__ = ["BAND_SCHEMA", "EDGE_SCHEMA", "EPS", "EXACT", "EXACT_SCHEMA", "GRID", "KEEP", "Forest", "band_groups",
           "bands_rows", "cluster_keepers", "diff", "grid_clusters", "grid_column", "keep_one_per_cluster",
           "lowest_threshold", "merge_forests", "normalize", "rank_of", "recall_at", "reduce_bucket", "s_curve",
           "s_curve_points", "shingle_hash", "shingle_hashes", "shingle_text", "shingles", "spanning_forest", "text_jaccard",
           "write_bands", "write_clusters"]
