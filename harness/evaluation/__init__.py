"""The evaluation and retrieval layer shared by tasks and samplers (public: plugins may import these modules).

- :mod:`~harness.evaluation.bm25`: ``bm25_tokens``, ``BM25Index`` (rank_bm25's Okapi BM25, batch scoring).
- :mod:`~harness.evaluation.search`: ``top_k``, ``chunked_top_k``, ``cosine_top_k`` (exact, bounded memory).
- :mod:`~harness.evaluation.maxsim`: batched MaxSim of multi-vector embeddings: ``maxsim_pairs``, ``MaxSimIndex``,
  ``maxsim_top_k`` (exact, bounded memory).
- :mod:`~harness.evaluation.ranking`: reranking metrics (useb), trec_eval's MAP/nDCG, top-list AP/nDCG@10.
- :mod:`~harness.evaluation.pairs`: ``PairSet``, scoring many pair sets in one model call, Spearman/Pearson per set
  and pooled.
- :mod:`~harness.evaluation.sampling`: the smoke profile's seeded evaluation sample.
- :mod:`~harness.evaluation.probe`: frozen-encoder classification probes (``train_probe``, macro-F1) and
  ``probe.cached_embeddings``, the per-model cache of a frozen encoder's embeddings shared by the probe tasks of a run.
- :mod:`~harness.evaluation.adapters`: ``as_embedder``, ``as_pair_scorer`` (the capability adapters), ``cosine_rows``,
  ``maxsim`` (public as ``harness.as_embedder``, ...).
- :mod:`~harness.evaluation.first_stage`: candidates for pair scorers to rerank (BM25, or an embedder built by the
  evaluation context).
"""
