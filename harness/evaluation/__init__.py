"""The evaluation and retrieval layer shared by tasks (BM25, top-k search, ranking metrics, pair-set scoring)."""
