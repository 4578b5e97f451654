#!/usr/bin/env python3
"""scripts/make_test_tokenizer.py — trains the test tokenizer of the Llama
test directories (tests/data/tok512/tokenizer.model).

stories260K (../shared/data) was trained with a 512-piece SentencePiece
tokenizer that is not among the shared files. The test directories use a
SentencePiece BPE model of the same shape instead: 512 pieces, <unk> <s>
</s> at ids 0-2, byte fallback (<0x00>..<0xFF> at ids 3-258), 253 merged
pieces, identity normalization: the layout llama2.c trains, so every id the
model emits has a piece and llama.cpp, transformers and convert_hf_to_gguf.py
treat it as a real Llama SentencePiece vocabulary. The merged pieces differ
from the model's own, so generated text is not meaningful English; the
tests compare token sequences and text between clients, never its sense.

The corpus is the English text of Python's own documentation topics
(pydoc_data), so no download is needed. Training is deterministic in the
pieces, not in every byte of the file (the model records its trainer
options), so the committed file is the reference; rerun only to change it.

    python3 scripts/make_test_tokenizer.py OUT_DIR   # writes OUT_DIR/tokenizer.model
Needs the `sentencepiece` package.
"""
import os
import sys
import tempfile

import pydoc_data.topics
import sentencepiece as spm


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-2].strip(), file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    text = "\n".join(v for _, v in sorted(pydoc_data.topics.topics.items()))
    lines = [line for line in text.splitlines() if line.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        prefix = os.path.join(tmp, "tokenizer")
        spm.SentencePieceTrainer.train(
            input=corpus, model_prefix=prefix, model_type="bpe", vocab_size=512, byte_fallback=True,
            character_coverage=1.0, split_digits=True, allow_whitespace_only_pieces=True,
            normalization_rule_name="identity", num_threads=1, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
            max_sentence_length=100000, minloglevel=2)
        with open(prefix + ".model", "rb") as src, open(os.path.join(out, "tokenizer.model"), "wb") as dst:
            dst.write(src.read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
