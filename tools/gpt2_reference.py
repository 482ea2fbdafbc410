#!/usr/bin/python3
"""gpt2_reference.py — the independent reference that specdec's C forward pass is checked against.

Two things, each written from its specification rather than from any library:

  * a reader and a writer of the safetensors file format, and a loader of Hugging Face checkpoint folders
    (config.json + model.safetensors, or model.safetensors.index.json + shards);
  * the Hugging Face GPT-2 forward pass (GPT2LMHeadModel, inference only), in a few lines of PyTorch.

Only Debian's python3-torch (1.13) is needed; `transformers` and `safetensors` are neither used nor installed.

    /usr/bin/python3 tools/gpt2_reference.py CHECKPOINT_DIR 464 3290 318

prints the logits of every position, one line of V space-separated %.7g floats each (the format of
`specdec logits --all`).

Dimension key: T tokens, d model width (n_embd), H heads, hd = d / H head width, F MLP width (n_inner),
V vocabulary, L layers.
"""

import dataclasses
import json
import math
import os
import struct
import sys
from typing import Optional

import torch

# ---------------------------------------------------------------------------------------------------------------
# safetensors
#
#   [u64 little-endian N] [N bytes of UTF-8 JSON header] [data area]
#
# The header maps each tensor name to {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, offsets into
# the data area, which the tensors cover back to back; an optional "__metadata__" entry maps strings to strings.
# Tensor data is little-endian and row-major.
# ---------------------------------------------------------------------------------------------------------------

DTYPES = {
    "BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16, "I32": torch.int32,
    "I64": torch.int64, "F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64,
}
DTYPE_NAMES = {torch_dtype: name for name, torch_dtype in DTYPES.items()}


def tensor_bytes(tensor: torch.Tensor) -> bytes:
    """The raw little-endian bytes of a tensor, row-major."""
    return tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def write_safetensors(path: str, tensors: dict, metadata: Optional[dict] = None, data_start_mod8: int = 0):
    """Writes {name: tensor} to `path`, tensors in name order. The header is padded with spaces so that the data
    area starts at a byte offset ≡ data_start_mod8 (mod 8): 0 as the safetensors library writes it, or an odd
    residue like the published gpt2 file (its data area starts at byte 14291 ≡ 3)."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        tensor = tensors[name]
        blob = tensor_bytes(tensor)
        header[name] = {"dtype": DTYPE_NAMES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((data_start_mod8 - 8 - len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.writelines(blobs)


def read_safetensors(path: str):
    """({name: tensor}, metadata) of one .safetensors file. Checks that the tensors exactly tile the data area."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8:8 + n])
    metadata = header.pop("__metadata__", {})
    data = raw[8 + n:]
    tensors, covered = {}, 0
    for name, info in sorted(header.items(), key=lambda item: item[1]["data_offsets"]):
        dtype, shape = DTYPES[info["dtype"]], info["shape"]
        begin, end = info["data_offsets"]
        n_bytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        if begin != covered or end - begin != n_bytes:
            raise ValueError(f"{path}: {name}: data_offsets [{begin}, {end}], "
                             f"expected [{covered}, {covered + n_bytes}]")
        chunk = bytearray(data[begin:end])  # a writable copy: torch.frombuffer shares memory with it
        tensors[name] = (torch.frombuffer(chunk, dtype=dtype).reshape(shape) if chunk
                         else torch.empty(shape, dtype=dtype))
        covered = end
    if covered != len(data):
        raise ValueError(f"{path}: tensors cover {covered} bytes of a {len(data)}-byte data area")
    return tensors, metadata


def load_checkpoint(folder: str):
    """(config.json as a dict, {name: tensor}) of a Hugging Face checkpoint folder: model.safetensors, or the shards
    that model.safetensors.index.json's weight_map names."""
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    index_path = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            shard_names = sorted(set(json.load(f)["weight_map"].values()))
    else:
        shard_names = ["model.safetensors"]
    tensors = {}
    for shard in shard_names:
        tensors.update(read_safetensors(os.path.join(folder, shard))[0])
    return config, tensors


# ---------------------------------------------------------------------------------------------------------------
# GPT-2
# ---------------------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class GPT2Config:
    """The config.json fields the forward pass depends on, with transformers' GPT2Config defaults."""
    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    n_inner: Optional[int] = None           # None: 4 · n_embd
    activation_function: str = "gelu_new"
    layer_norm_epsilon: float = 1e-5
    scale_attn_weights: bool = True
    scale_attn_by_inverse_layer_idx: bool = False
    tie_word_embeddings: bool = True

    @classmethod
    def from_json(cls, fields: dict) -> "GPT2Config":
        return cls(**{f.name: fields[f.name] for f in dataclasses.fields(cls) if f.name in fields})


def gpt2_weights(tensors: dict) -> dict:
    """A checkpoint's tensors under their GPT2Model names ("wte.weight", "h.0.attn.c_attn.weight", ...): drops the
    "transformer." prefix of GPT2LMHeadModel checkpoints and the causal-mask buffers h.N.attn.bias and
    h.N.attn.masked_bias, which hold no weights (the mask is rebuilt below)."""
    weights = {}
    for name, tensor in tensors.items():
        name = name.removeprefix("transformer.")
        if not name.endswith((".attn.bias", ".attn.masked_bias")):
            weights[name] = tensor
    return weights


def layer_norm(x, gamma, beta, eps):
    """(x − mean(x)) / √(var(x) + eps) · γ + β over the last axis, var the biased (1/n) variance."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


def gelu_tanh(x):
    """GELU, tanh approximation ("gelu_new"): 0.5x(1 + tanh(√(2/π)(x + 0.044715x³)))."""
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    """GELU, exact ("gelu"): 0.5x(1 + erf(x/√2))."""
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


ACTIVATIONS = {"gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh, "gelu_fast": gelu_tanh, "gelu": gelu_erf}


def forward(cfg: GPT2Config, weights: dict, tokens: list, dtype=torch.float64) -> torch.Tensor:
    """Logits [T, V] of `tokens` at positions 0..T−1, computed in `dtype` from the checkpoint's weights (converted
    exactly: F16 and BF16 values are representable in F32 and F64).

    GPT-2's linear layers are Conv1D: y = x W + b with W stored [n_in, n_out]."""
    def w(name):
        return weights[name].to(dtype)

    T, d, H = len(tokens), cfg.n_embd, cfg.n_head
    hd = d // H
    eps = cfg.layer_norm_epsilon
    act = ACTIVATIONS[cfg.activation_function]
    causal = torch.ones(T, T, dtype=torch.bool).tril()                   # query t sees keys s ≤ t

    x = w("wte.weight")[tokens] + w("wpe.weight")[:T]                     # residual stream [T, d]
    for layer in range(cfg.n_layer):
        p = f"h.{layer}."

        # Attention: q | k | v = LN₁(x) W_attn + b_attn, each [T, d], cut into H heads of hd.
        a = layer_norm(x, w(p + "ln_1.weight"), w(p + "ln_1.bias"), eps)
        qkv = a @ w(p + "attn.c_attn.weight") + w(p + "attn.c_attn.bias")                   # [T, 3d]
        q, k, v = (z.reshape(T, H, hd).transpose(0, 1) for z in qkv.split(d, dim=1))       # [H, T, hd]
        # scores = q kᵀ / (√hd if scale_attn_weights) / (layer + 1 if scale_attn_by_inverse_layer_idx)
        scores = q @ k.transpose(1, 2)                                                      # [H, T, T]
        if cfg.scale_attn_weights:
            scores = scores / math.sqrt(hd)
        if cfg.scale_attn_by_inverse_layer_idx:
            scores = scores / (layer + 1)
        probs = torch.softmax(scores.masked_fill(~causal, -math.inf), dim=-1)
        heads = (probs @ v).transpose(0, 1).reshape(T, d)                                  # [T, d]
        x = x + heads @ w(p + "attn.c_proj.weight") + w(p + "attn.c_proj.bias")

        # MLP: act(LN₂(x) W_fc + b_fc) W_proj + b_proj, through F hidden units.
        m = layer_norm(x, w(p + "ln_2.weight"), w(p + "ln_2.bias"), eps)
        m = act(m @ w(p + "mlp.c_fc.weight") + w(p + "mlp.c_fc.bias"))                    # [T, F]
        x = x + m @ w(p + "mlp.c_proj.weight") + w(p + "mlp.c_proj.bias")

    x = layer_norm(x, w("ln_f.weight"), w("ln_f.bias"), eps)
    # LM head: tied to wte unless the config unties it (transformers ties lm_head.weight := wte.weight otherwise).
    head = w("wte.weight") if cfg.tie_word_embeddings else w("lm_head.weight")            # [V, d]
    return x @ head.T                                                                      # [T, V]


def main(argv):
    if len(argv) < 3:
        sys.exit(f"usage: {argv[0]} CHECKPOINT_DIR TOKEN_ID...")
    torch.set_num_threads(1)
    config, tensors = load_checkpoint(argv[1])
    logits = forward(GPT2Config.from_json(config), gpt2_weights(tensors), [int(t) for t in argv[2:]])
    for row in logits.to(torch.float32).tolist():
        print(" ".join(f"{value:.7g}" for value in row))


if __name__ == "__main__":
    main(sys.argv)
