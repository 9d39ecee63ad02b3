"""Sizes of the core.text corpora: documents, UTF-8 bytes, and tokens of a BPE-4096 trained on each
corpus's training split (val 0.1, seed 0), as docs/text.md reports them.

    nice .venv/bin/python -P bench/text/sizes.py
"""

from __future__ import annotations

import time

from methodkit.core.text.corpora import CORPORA, load_corpus
from methodkit.core.text.tokens import build


def main() -> None:
    print("corpus  documents  distinct  bytes  train_docs  val_docs  bpe4096_tokens  bytes_per_token  load_cpu_s")
    for name in CORPORA:
        cpu = time.process_time()
        corpus = load_corpus(name)
        load_cpu = time.process_time() - cpu
        tokens, _ = build(corpus, "bpe:4096", val=0.1, seed=0)
        counts = [int((tokens.split == code).sum()) for code in (0, 1)]
        n_tokens = tokens.n_tokens()
        print(
            f"{name}  {len(corpus)}  {len(set(t.strip() for t in corpus.texts))}  {corpus.n_bytes}  "
            f"{counts[0]}  {counts[1]}  {n_tokens}  {corpus.n_bytes / n_tokens:.2f}  {load_cpu:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
