"""The peer of ``runtime_speed.py`` run under another Python (``--peer-python``): sentence-transformers'
``SentenceTransformer(path, backend="onnx").encode`` in a long-lived process, for an environment whose
sentence-transformers / optimum-onnx / transformers versions differ from the harness' own (optimum-onnx needs an
older transformers than the harness runs).

Protocol (one line each, on stdin / stdout): started as ``python st_onnx_peer.py MODEL TEXTS_JSON BATCH MAX_LENGTH
OUT_NPY [QUANTISATION]``, it loads the model (exporting it through optimum when the folder has no ONNX file; with
QUANTISATION, e.g. ``avx512_vnni``, sentence-transformers' ``export_dynamic_quantized_onnx_model`` of that
configuration, and the quantised file is loaded instead), warms up, prints
``ready <versions>``; then for every ``encode`` line it encodes the texts, prints ``seconds <wall>`` (the encode
call alone) and saves the embeddings to OUT_NPY; ``quit`` ends it. Imports nothing from the harness.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    model_path, texts_path, batch_size, max_length, out_path = sys.argv[1:6]
    quantisation = sys.argv[6] if len(sys.argv) > 6 else None
    import numpy as np
    import onnxruntime
    import sentence_transformers
    import transformers
    from sentence_transformers import SentenceTransformer

    with open(texts_path, encoding="utf-8") as stream:
        texts = json.load(stream)
    model = SentenceTransformer(model_path, backend="onnx", device="cpu")
    if quantisation:
        from pathlib import Path

        from sentence_transformers import export_dynamic_quantized_onnx_model

        export_dynamic_quantized_onnx_model(model, quantisation, model_path)
        (quantised,) = Path(model_path).glob(f"onnx/*qint8*{quantisation}*.onnx")
        model = SentenceTransformer(
            model_path, backend="onnx", device="cpu", model_kwargs={"file_name": f"onnx/{quantised.name}"}
        )
    model.max_seq_length = int(max_length)

    def encode(batch: list[str]):
        return model.encode(batch, batch_size=int(batch_size), convert_to_numpy=True, normalize_embeddings=False)

    encode(texts[:64])  # warm-up, as the other ways get
    versions = (
        (f"{quantisation} int8, " if quantisation else "")
        + f"sentence-transformers {sentence_transformers.__version__}, transformers {transformers.__version__}, "
        f"onnxruntime {onnxruntime.__version__}"
    )
    print(f"ready {versions}", flush=True)
    for line in sys.stdin:
        if line.strip() != "encode":
            break
        started = time.perf_counter()
        embeddings = encode(texts)
        seconds = time.perf_counter() - started
        np.save(out_path, embeddings)
        print(f"seconds {seconds:.6f}", flush=True)


if __name__ == "__main__":
    main()
