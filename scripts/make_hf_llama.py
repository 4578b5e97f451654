#!/usr/bin/env python3
"""scripts/make_hf_llama.py — a Hugging Face Llama model directory made from
real weights, for the tests and the demo.

    python3 scripts/make_hf_llama.py OUT_DIR [--weights FILE.safetensors]
        [--shards N] [--tokenizer tokenizer.model]

Writes OUT_DIR/config.json (LlamaForCausalLM), generation_config.json,
tokenizer.model + tokenizer_config.json + special_tokens_map.json, and the
weights: model.safetensors (--shards 1) or model-0000i-of-0000N.safetensors
with model.safetensors.index.json (--shards N >= 2; tensors in file order,
cut into N runs of about equal bytes). Tensor bytes, dtypes, shapes and
names are copied unchanged from --weights (default
../shared/data/stories260K.f32.safetensors beside the repository: karpathy's
llama2.c stories260K, already under Hugging Face names). The hyperparameters
come from the tensor shapes; the head count, which shapes cannot give, is
stories260K's (8 heads of 8; --heads to change). Embeddings are tied when
the file has no lm_head.weight.

The tokenizer is the repository's test tokenizer (tests/data/tok512, see
scripts/make_test_tokenizer.py): stories260K's own 512-piece tokenizer is not
among the shared files.

Standard library only (no numpy, no torch), so it runs before anything is
installed. Deterministic: the same inputs give the same bytes.
"""
import argparse
import json
import os
import re
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise SystemExit(f"{path}: too short for a safetensors file")
    n = struct.unpack("<Q", data[:8])[0]
    if 8 + n > len(data):
        raise SystemExit(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", None)
    base = 8 + n
    tensors = []
    for name, info in header.items():
        b, e = info["data_offsets"]
        tensors.append((b, name, info["dtype"], info["shape"], data[base + b:base + e]))
    tensors.sort()
    return [(name, dtype, shape, raw) for _, name, dtype, shape, raw in tensors], meta


def write_safetensors(path, tensors, meta):
    header = {}
    if meta:
        header["__metadata__"] = meta
    off = 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    js = json.dumps(header, separators=(",", ":")).encode()
    js += b" " * ((8 - len(js) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for _, _, _, raw in tensors:
            f.write(raw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--weights", default=os.path.join(ROOT, "..", "shared", "data", "stories260K.f32.safetensors"))
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "tests", "data", "tok512", "tokenizer.model"))
    args = ap.parse_args()
    if args.shards < 1:
        ap.error("--shards must be at least 1")

    tensors, _ = read_safetensors(args.weights)
    by_name = {t[0]: t for t in tensors}
    emb = by_name.get("model.embed_tokens.weight")
    if emb is None:
        raise SystemExit(f"{args.weights}: no model.embed_tokens.weight (not a Llama checkpoint under HF names)")
    vocab, hidden = emb[2]
    layers = 1 + max(int(m.group(1)) for n in by_name if (m := re.match(r"model\.layers\.(\d+)\.", n)))
    inter = by_name["model.layers.0.mlp.gate_proj.weight"][2][0]
    kv_rows = by_name["model.layers.0.self_attn.k_proj.weight"][2][0]
    if hidden % args.heads:
        raise SystemExit(f"--heads {args.heads} does not divide the hidden size {hidden}")
    head_dim = hidden // args.heads
    if kv_rows % head_dim:
        raise SystemExit(f"k_proj rows {kv_rows} are not a multiple of the head size {head_dim}")
    dtype = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}.get(emb[1], "float32")

    os.makedirs(args.out, exist_ok=True)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": args.heads,
        "num_key_value_heads": kv_rows // head_dim,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-05,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": "lm_head.weight" not in by_name,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": dtype,
    }
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2, "do_sample": False}, f, indent=2)
        f.write("\n")
    shutil.copyfile(args.tokenizer, os.path.join(args.out, "tokenizer.model"))
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False,
                   "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "legacy": True,
                   "model_max_length": 512, "clean_up_tokenization_spaces": False}, f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, f, indent=2)
        f.write("\n")

    meta = {"format": "pt"}
    if args.shards == 1:
        write_safetensors(os.path.join(args.out, "model.safetensors"), tensors, meta)
        return 0
    if args.shards > len(tensors):
        raise SystemExit(f"--shards {args.shards}: the file has only {len(tensors)} tensors")
    total = sum(len(t[3]) for t in tensors)
    groups, cur, acc = [], [], 0
    for i, t in enumerate(tensors):
        cur.append(t)
        acc += len(t[3])
        left_tensors = len(tensors) - i - 1
        left_groups = args.shards - len(groups) - 1
        if left_groups > 0 and (acc >= total * (len(groups) + 1) / args.shards or left_tensors == left_groups):
            groups.append(cur)
            cur = []
    groups.append(cur)
    n = len(groups)
    weight_map = {}
    for i, g in enumerate(groups, 1):
        name = f"model-{i:05d}-of-{n:05d}.safetensors"
        write_safetensors(os.path.join(args.out, name), g, meta)
        for t in g:
            weight_map[t[0]] = name
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
