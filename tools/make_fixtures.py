#!/usr/bin/python3
"""make_fixtures.py — writes the forward-pass test fixtures under tests/fixtures/ (tests/model/test_forward.c reads them).

    /usr/bin/python3 tools/make_fixtures.py

Each fixture is a small random GPT-2 checkpoint in the exact Hugging Face layout (config.json with GPT2Config field
names; model.safetensors, or model.safetensors.index.json + shards) and expected.bin: a token sequence and the
logits tools/gpt2_reference.py computes for it from the files as written. The broken/ fixtures are copies of one
of them that break one loader rule each. Everything is seeded from the fixture's name, so a run rewrites the same
bytes; tests/fixtures/README.md is written from the tables below.

expected.bin, little-endian:  "SDFX"  u32 version (1)  u32 T  u32 V  i32 tokens[T]  f32 logits[T][V]
"""

import dataclasses
import json
import math
import os
import shutil
import struct
import sys
import zlib
from typing import Callable, Optional

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as ref  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures")
EXPECTED_MAGIC, EXPECTED_VERSION = b"SDFX", 1


@dataclasses.dataclass(frozen=True)
class Fixture:
    name: str
    covers: str                            # what the fixture is for, in a few words (README)
    d: int                                 # n_embd
    H: int                                 # n_head
    L: int                                 # n_layer
    V: int                                 # vocab_size
    n_positions: int
    dtype: str = "F32"                     # of every float tensor: F32, F16 or BF16
    prefix: str = ""                       # "transformer." as GPT2LMHeadModel saves, "" as GPT2Model saves
    attn_bias: Optional[str] = None        # dtype of the h.N.attn.bias buffer (tril [1, 1, n, n]); None: absent
    masked_bias: Optional[str] = None      # dtype of the h.N.attn.masked_bias buffer (scalar −1e4); None: absent
    tied: bool = True                      # False: lm_head.weight ≠ wte, and tie_word_embeddings false
    activation: str = "gelu_new"
    n_inner: Optional[int] = None          # None: config.json says null (4d)
    scale_attn_weights: bool = True
    scale_attn_by_inverse_layer_idx: bool = False
    data_start_mod8: int = 0               # byte offset of each file's data area, mod 8
    shards: int = 1


FIXTURES = [
    Fixture("f32_tied_prefix", "F32; transformer. prefix; BOOL attn.bias + F32 masked_bias; tied head",
            d=32, H=2, L=2, V=61, n_positions=32, prefix="transformer.", attn_bias="BOOL", masked_bias="F32"),
    Fixture("f32_untied_erf_unaligned", "F32; untied lm_head; gelu (erf); data area at an odd offset",
            d=48, H=3, L=2, V=97, n_positions=48, tied=False, activation="gelu", data_start_mod8=3),
    Fixture("f32_odd_width", "F32; d = 33, head width 11 (no SIMD-friendly size anywhere); F32 attn.bias + masked_bias",
            d=33, H=3, L=2, V=73, n_positions=32, attn_bias="F32", masked_bias="F32", data_start_mod8=1),
    Fixture("f32_sharded_inner", "F32; 2 shards + index; n_inner = 72 (≠ 4d); untied; transformer. prefix",
            d=40, H=4, L=3, V=301, n_positions=64, prefix="transformer.", tied=False, n_inner=72,
            data_start_mod8=7, shards=2),
    Fixture("f16_inverse_layer_idx", "F16; scale_attn_by_inverse_layer_idx; U8 attn.bias + F16 masked_bias; prefix",
            d=64, H=4, L=3, V=131, n_positions=64, dtype="F16", prefix="transformer.", attn_bias="U8",
            masked_bias="F16", scale_attn_by_inverse_layer_idx=True),
    Fixture("f16_wide_one_layer", "F16; d = 96, one layer; gelu_pytorch_tanh; masked_bias without attn.bias",
            d=96, H=4, L=1, V=211, n_positions=32, dtype="F16", activation="gelu_pytorch_tanh", masked_bias="F32"),
    Fixture("bf16_no_scale_erf", "BF16; scale_attn_weights false; gelu (erf); F32 attn.bias",
            d=64, H=2, L=2, V=257, n_positions=40, dtype="BF16", attn_bias="F32", activation="gelu",
            scale_attn_weights=False),
    Fixture("bf16_untied_unaligned", "BF16; untied lm_head; head width 8; n_inner = 100; odd data offset; prefix",
            d=32, H=4, L=3, V=199, n_positions=32, dtype="BF16", prefix="transformer.", tied=False, n_inner=100,
            data_start_mod8=5),
]


@dataclasses.dataclass(frozen=True)
class Broken:
    name: str
    rule: str                              # the loader rule the checkpoint breaks
    mentions: tuple                        # what the one-line error must name (compared ignoring spaces): the
                                           # file, or the folder when a tensor is missing from every file
    breaks: Callable                       # (config dict, {name: tensor}) → the same, broken; config None: no file


def drop(name):
    return lambda config, tensors: (config, {k: v for k, v in tensors.items() if k != name})


def replace(name, new):
    return lambda config, tensors: (config, {**tensors, name: new(tensors[name])})


BROKEN_BASE = FIXTURES[0]  # the broken checkpoints are copies of this one
BROKEN = [
    Broken("missing_tensor", "every tensor the config implies is present",
           ("broken/missing_tensor", "h.1.mlp.c_fc.weight"), drop("transformer.h.1.mlp.c_fc.weight")),
    Broken("wrong_shape", "every tensor has the shape the config implies (here c_attn stored transposed)",
           ("model.safetensors", "h.0.attn.c_attn.weight", "32,96", "96,32"),
           replace("transformer.h.0.attn.c_attn.weight", lambda w: w.T.contiguous())),
    Broken("wrong_dtype", "weights are F32, F16 or BF16 (here an I32 matrix)",
           ("model.safetensors", "h.0.mlp.c_proj.weight", "I32"),
           replace("transformer.h.0.mlp.c_proj.weight", lambda w: (w * 100).to(torch.int32))),
    Broken("untied_without_head", "tie_word_embeddings false needs lm_head.weight",
           ("broken/untied_without_head", "lm_head.weight"),
           lambda config, tensors: ({**config, "tie_word_embeddings": False}, tensors)),
    Broken("missing_config", "the folder has a config.json",
           ("config.json",), lambda config, tensors: (None, tensors)),
]


def config_json(fx: Fixture) -> dict:
    """config.json as transformers writes it for GPT2LMHeadModel (GPT2Config.to_dict)."""
    return {
        "activation_function": fx.activation, "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
        "bos_token_id": fx.V - 1, "embd_pdrop": 0.1, "eos_token_id": fx.V - 1, "initializer_range": 0.02,
        "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": fx.n_positions, "n_embd": fx.d,
        "n_head": fx.H, "n_inner": fx.n_inner, "n_layer": fx.L, "n_positions": fx.n_positions,
        "reorder_and_upcast_attn": False, "resid_pdrop": 0.1,
        "scale_attn_by_inverse_layer_idx": fx.scale_attn_by_inverse_layer_idx,
        "scale_attn_weights": fx.scale_attn_weights, "summary_activation": None, "summary_first_dropout": 0.1,
        "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
        "tie_word_embeddings": fx.tied,
        "torch_dtype": {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[fx.dtype],
        "transformers_version": "4.35.2", "use_cache": True, "vocab_size": fx.V,
    }


def random_tensors(fx: Fixture, gen: torch.Generator) -> dict:
    """Random weights under their checkpoint names, at a scale where every part of the model matters: matrices
    N(0, g²/n_in) (attention logits of std ≈ 2, GELU inputs of std ≈ 1), embeddings N(0, 0.2²), LayerNorm
    γ ≈ 1 and β ≈ 0 with noise, biases N(0, 0.05²); rounded to the fixture's dtype. Buffers as transformers saves
    them."""
    def normal(*shape, std, mean=0.0):
        return torch.randn(*shape, generator=gen) * std + mean

    def conv1d(n_in, n_out, gain=1.0):   # Conv1D: weight [n_in, n_out], bias [n_out]
        return normal(n_in, n_out, std=gain / math.sqrt(n_in)), normal(n_out, std=0.05)

    def layer_norm(d):
        return normal(d, std=0.1, mean=1.0), normal(d, std=0.05)

    d, F, n = fx.d, fx.n_inner or 4 * fx.d, fx.n_positions
    t = {"wte.weight": normal(fx.V, d, std=0.2), "wpe.weight": normal(n, d, std=0.1)}
    for layer in range(fx.L):
        p = f"h.{layer}."
        t[p + "ln_1.weight"], t[p + "ln_1.bias"] = layer_norm(d)
        t[p + "attn.c_attn.weight"], t[p + "attn.c_attn.bias"] = conv1d(d, 3 * d, gain=1.5)
        t[p + "attn.c_proj.weight"], t[p + "attn.c_proj.bias"] = conv1d(d, d)
        t[p + "ln_2.weight"], t[p + "ln_2.bias"] = layer_norm(d)
        t[p + "mlp.c_fc.weight"], t[p + "mlp.c_fc.bias"] = conv1d(d, F)
        t[p + "mlp.c_proj.weight"], t[p + "mlp.c_proj.bias"] = conv1d(F, d)
    t["ln_f.weight"], t["ln_f.bias"] = layer_norm(d)
    tensors = {fx.prefix + name: value.to(ref.DTYPES[fx.dtype]) for name, value in t.items()}

    for layer in range(fx.L):
        p = f"{fx.prefix}h.{layer}.attn."
        if fx.attn_bias:
            tensors[p + "bias"] = torch.ones(1, 1, n, n).tril().to(ref.DTYPES[fx.attn_bias])
        if fx.masked_bias:
            tensors[p + "masked_bias"] = torch.tensor(-1e4).to(ref.DTYPES[fx.masked_bias])
    if not fx.tied:
        tensors["lm_head.weight"] = normal(fx.V, d, std=0.2).to(ref.DTYPES[fx.dtype])
    return tensors


def write_checkpoint(folder: str, fx: Fixture, config: Optional[dict], tensors: dict):
    """config.json and the weights, in fx.shards files of about equal size."""
    os.makedirs(folder)
    if config is not None:
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
            f.write("\n")
    metadata = {"format": "pt"}
    if fx.shards == 1:
        ref.write_safetensors(os.path.join(folder, "model.safetensors"), tensors, metadata, fx.data_start_mod8)
        return
    sizes = {name: len(ref.tensor_bytes(tensor)) for name, tensor in tensors.items()}
    total, shards, filled = sum(sizes.values()), [{} for _ in range(fx.shards)], 0
    for name in sorted(tensors):
        shards[min(filled * fx.shards // total, fx.shards - 1)][name] = tensors[name]
        filled += sizes[name]
    weight_map = {}
    for i, shard in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{fx.shards:05d}.safetensors"
        ref.write_safetensors(os.path.join(folder, file), shard, metadata, fx.data_start_mod8)
        weight_map.update({name: file for name in shard})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        f.write("\n")


def write_expected(path: str, tokens: list, logits: torch.Tensor):
    T, V = logits.shape
    with open(path, "wb") as f:
        f.write(EXPECTED_MAGIC + struct.pack("<3I", EXPECTED_VERSION, T, V))
        f.write(struct.pack(f"<{T}i", *tokens))
        f.write(ref.tensor_bytes(logits.to(torch.float32)))


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a − b| / max(|b|, 0.1 · max|b| over b's row): the measure tests/model/test_forward.c applies."""
    floor = 0.1 * b.abs().amax(dim=-1, keepdim=True)
    return ((a - b).abs() / torch.maximum(b.abs(), floor)).max().item()


def make_fixture(fx: Fixture) -> str:
    """Writes tests/fixtures/<name>/ and returns a line of README: what it covers and its reference statistics."""
    gen = torch.Generator().manual_seed(zlib.crc32(fx.name.encode()))
    tensors = random_tensors(fx, gen)
    T = int(torch.randint(7, 13, (), generator=gen))
    tokens = torch.randint(0, fx.V, (T,), generator=gen).tolist()
    tokens[1], tokens[-1] = fx.V - 1, 0        # the first and last rows of wte are read too

    folder = os.path.join(ROOT, fx.name)
    write_checkpoint(folder, fx, config_json(fx), tensors)
    # The reference reads the files back, so it sees exactly what the C loader sees.
    config, loaded = ref.load_checkpoint(folder)
    cfg, weights = ref.GPT2Config.from_json(config), ref.gpt2_weights(loaded)
    logits = ref.forward(cfg, weights, tokens, torch.float64)
    write_expected(os.path.join(folder, "expected.bin"), tokens, logits)

    # The tolerance of the C test (1e-4) must sit between two errors: how far a plain F32 evaluation of the same
    # math lands from this F64 reference (the noise floor), and what one of the smallest plausible mistakes costs
    # (computing the other GELU).
    f32_error = relative_error(ref.forward(cfg, weights, tokens, torch.float32).double(), logits)
    other = "gelu_new" if cfg.activation_function == "gelu" else "gelu"
    other_gelu = dataclasses.replace(cfg, activation_function=other)
    gelu_error = relative_error(ref.forward(other_gelu, weights, tokens, torch.float64), logits)
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    print(f"{fx.name:28s} T={T:2d} V={fx.V:3d}  |logits| ≤ {logits.abs().max():5.2f}  "
          f"errors: F32 {f32_error:.1e}, other GELU {gelu_error:.1e}  {size / 1024:5.0f} KiB")
    dims = f"d={fx.d} H={fx.H} L={fx.L} V={fx.V} n_positions={fx.n_positions} T={T}"
    return f"| `{fx.name}` | {dims} | {fx.covers} | {f32_error:.1e} | {gelu_error:.1e} |"


def make_broken(broken: Broken, base: Fixture) -> str:
    """Writes tests/fixtures/broken/<name>/: the base fixture with one rule broken, and broken.txt saying which
    rule and what the error message must name."""
    folder = os.path.join(ROOT, "broken", broken.name)
    config, tensors = ref.load_checkpoint(os.path.join(ROOT, base.name))
    config, tensors = broken.breaks(config, tensors)
    write_checkpoint(folder, base, config, tensors)
    with open(os.path.join(folder, "broken.txt"), "w") as f:
        f.write(f"rule: {broken.rule}\n")
        f.writelines(f"mention: {m}\n" for m in broken.mentions)
    return f"| `{broken.name}` | {broken.rule} | {', '.join(f'`{m}`' for m in broken.mentions)} |"


README = """# Forward-pass fixtures

Written by `tools/make_fixtures.py` (this file too); regenerate with

    /usr/bin/python3 tools/make_fixtures.py

Every run writes the same bytes (all randomness is seeded from the fixture's name). `tests/model/test_forward.c` runs
every folder here that holds an `expected.bin`, and every folder under `broken/`.

## Checkpoints

Each folder is a small random GPT-2 checkpoint in the Hugging Face layout: `config.json` (GPT2Config field names),
and `model.safetensors`, or `model.safetensors.index.json` with its shards. Weights are random at a scale where
every part of the model matters (attention logits of standard deviation ≈ 2, GELU inputs ≈ 1, LayerNorm γ ≈ 1 and
β ≈ 0 with noise, random biases), stored in the fixture's dtype (every float tensor: F32, F16 or BF16).

`expected.bin` holds the token sequence (T = 7..12 random ids, including 0 and V − 1) and the logits of every
position, computed by `tools/gpt2_reference.py` in F64 from the weights as stored (F16 and BF16 values convert
exactly), after reading the checkpoint back from disk. Little-endian:

    "SDFX"  u32 version (1)  u32 T  u32 V  i32 tokens[T]  f32 logits[T][V]

The C test accepts an error of 1e-4 by the measure |a − b| / max(|b|, 0.1 · max |b| over the row). The last two
columns bracket that tolerance: the largest error of a plain F32 evaluation of the same math against the F64
reference (the noise floor every F32 implementation shares), and the error of computing the other GELU (`gelu`
for `gelu_new` and back), one of the smallest plausible mistakes.

| fixture | dimensions | covers | F32 | other GELU |
| --- | --- | --- | --- | --- |
{fixtures}

Across them: dtypes F32, F16, BF16; names with and without the `transformer.` prefix; the causal-mask buffers
`h.N.attn.bias` (BOOL, U8 or F32 `[1, 1, n, n]`) and `h.N.attn.masked_bias` (F32 or F16 scalar) present or absent;
tied and untied LM heads; `gelu`, `gelu_new`, `gelu_pytorch_tanh`; `scale_attn_by_inverse_layer_idx`,
`scale_attn_weights` false, explicit `n_inner`; data areas at offsets ≡ 0, 1, 3, 5, 7 (mod 8) (the published gpt2
file's starts at byte 14291); one sharded checkpoint.

## broken/

Copies of `{base}` that break one loader rule each. `broken.txt` in each folder states the rule
(`rule:`) and what the one-line error must name (`mention:`, compared ignoring spaces; a tensor missing from
every file is blamed on the folder, a bad tensor on its file). Loading must fail:
`specdec logits` exits with status 2 and prints one line on stderr.

| checkpoint | rule | error must name |
| --- | --- | --- |
{broken}
"""


def main():
    torch.set_num_threads(1)
    for name in [fx.name for fx in FIXTURES] + ["broken"]:
        shutil.rmtree(os.path.join(ROOT, name), ignore_errors=True)
    fixture_rows = [make_fixture(fx) for fx in FIXTURES]
    broken_rows = [make_broken(b, BROKEN_BASE) for b in BROKEN]
    with open(os.path.join(ROOT, "README.md"), "w") as f:
        f.write(README.format(fixtures="\n".join(fixture_rows), broken="\n".join(broken_rows), base=BROKEN_BASE.name))


if __name__ == "__main__":
    main()
