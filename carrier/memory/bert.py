"""A BERT sentence encoder in numpy: the default embedding engine, without torch.

all-MiniLM-L6-v2 is a 6-layer BERT whose sentence vector is the mean of its token vectors,
normalized. This module runs that forward pass with numpy (its BLAS does the matrix products)
from the model directory's own files: ``config.json``, ``model.safetensors``, ``tokenizer.json``
(Hugging Face ``tokenizers``, the Rust tokenizer transformers' fast tokenizer wraps) and the
sentence-transformers module list. Its vectors equal sentence-transformers' to ~2e-7 (tests pin
this on a varied corpus), so the stored memories of either engine are the same model's.

Why not torch: importing sentence-transformers (torch, transformers, scikit-learn, SciPy) took
4.4-5.7 s of a warm start, most of the 3 s a first answer may take; this loads in ~0.2 s. The
matrix products are the same BLAS work as torch's (measured at parity here); the elementwise
steps are kept in cache by taking GELU a few rows at a time, and GELU's erf is a rational
approximation accurate to ~1e-6 (float32's own precision at the values it sees). On one core it
encodes a batch of 16 chat-length texts in about the time torch does (96 against 94 ms here;
docs/benchmarks.md).

Only what all-MiniLM-L6-v2 and its relatives use is supported: a ``bert`` model with absolute
positions and exact GELU, safetensors weights, mean pooling, an optional ``Normalize``.
:func:`unsupported` says why another directory is not; sentence-transformers serves those.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["BertEncoder", "unsupported"]

_ROWS = 32
"""Rows of the feed-forward block's intermediate that GELU takes at a time: 32 x 1536 floats
(~200 KB) stay in cache through its dozen elementwise passes, 4.5x faster than passes over the
whole batch. (The matrix products themselves run whole: in pieces they were 30% slower.)"""

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"

# erf(x) ~ x * P(x^2) / Q(x^2) on [-4, 4] (float32's erf is +-1 beyond): the rational
# approximation of Eigen and XLA's float32 erf, absolute error ~1e-7 on erf, ~1e-6 on GELU.
_ERF_P = tuple(
    np.float32(c)
    for c in (
        -2.72614225801306e-10,
        2.77068142495902e-08,
        -2.10102402082508e-06,
        -5.69250639462346e-05,
        -7.34990630326855e-04,
        -2.95459980854025e-03,
        -1.60960333262415e-02,
    )
)
_ERF_Q = tuple(
    np.float32(c)
    for c in (
        -1.45660718464996e-05,
        -2.13374055278905e-04,
        -1.68282697438203e-03,
        -7.37332916720468e-03,
        -1.42647390514189e-02,
    )
)
_SQRT_HALF = np.float32(1 / math.sqrt(2))


def gelu(h: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU of float32 ``h``, as a new array: ``h * (1 + erf(h / sqrt 2)) / 2``."""
    x = h * _SQRT_HALF
    np.clip(x, -4, 4, out=x)
    x2 = x * x
    p = x2 * _ERF_P[0]
    p += _ERF_P[1]
    for c in _ERF_P[2:]:
        p *= x2
        p += c
    q = x2 * _ERF_Q[0]
    q += _ERF_Q[1]
    for c in _ERF_Q[2:]:
        q *= x2
        q += c
    del x2
    p *= x
    p /= q
    p += 1
    p *= h
    p *= np.float32(0.5)
    return p


def _read_json(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return json.load(handle)


def unsupported(path: str | Path) -> str | None:
    """Why the sentence-transformers directory ``path`` cannot run here (None: it can)."""
    root = Path(path)
    try:
        config = _read_json(root / "config.json")
        modules = _read_json(root / "modules.json")
    except (OSError, ValueError) as exc:
        return f"its config.json or modules.json cannot be read ({exc})"
    if config.get("model_type") != "bert":
        return f"it is a {config.get('model_type')!r} model, not a BERT"
    if config.get("position_embedding_type", "absolute") != "absolute":
        return "its positions are not absolute"
    if config.get("hidden_act") != "gelu":
        return f"its activation is {config.get('hidden_act')!r}, not exact GELU"
    kinds = [m.get("type") for m in modules]
    if kinds[:2] != [_TRANSFORMER, _POOLING] or kinds[2:] not in ([], [_NORMALIZE]):
        return f"its modules are {kinds}, not Transformer, mean Pooling and Normalize"
    if modules[0].get("path") not in ("", None):
        return "its transformer is not at the directory's top"
    try:
        pooling = _read_json(root / modules[1]["path"] / "config.json")
    except (OSError, ValueError, KeyError) as exc:
        return f"its pooling config cannot be read ({exc})"
    modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode") and v)
    if modes != ["pooling_mode_mean_tokens"]:
        return f"its pooling is {modes}, not the mean of the tokens"
    for name in ("model.safetensors", "tokenizer.json"):
        if not (root / name).is_file():
            return f"it has no {name}"
    return None


class _Layer:
    """One encoder layer's weights, laid out for ``x @ w`` (row-major, transposed once)."""

    def __init__(self, w: dict[str, np.ndarray], p: str) -> None:
        def t(name: str) -> np.ndarray:
            return np.ascontiguousarray(w[p + name].T)

        names = ("query", "key", "value")
        self.qkv_w = np.ascontiguousarray(
            np.concatenate([w[f"{p}attention.self.{n}.weight"] for n in names]).T
        )
        self.qkv_b = np.concatenate([w[f"{p}attention.self.{n}.bias"] for n in names])
        self.out_w = t("attention.output.dense.weight")
        self.out_b = w[p + "attention.output.dense.bias"]
        self.ln1 = (
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
        )
        self.up_w = t("intermediate.dense.weight")
        self.up_b = w[p + "intermediate.dense.bias"]
        self.down_w = t("output.dense.weight")
        self.down_b = w[p + "output.dense.bias"]
        self.ln2 = (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])


class BertEncoder:
    """The forward pass of a supported directory (:func:`unsupported` is None for it).

    :meth:`encode` returns one normalized float32 row per text, as sentence-transformers'
    ``encode(texts, normalize_embeddings=True)`` does. Not thread-safe: one caller at a time
    (the embedder's worker thread).
    """

    def __init__(self, path: str | Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        root = Path(path)
        reason = unsupported(root)
        if reason is not None:
            raise ValueError(f"the model at {root} cannot run on the numpy engine: {reason}")
        config = _read_json(root / "config.json")
        st_config: dict[str, Any] = {}
        if (root / "sentence_bert_config.json").is_file():
            st_config = _read_json(root / "sentence_bert_config.json")
        self.heads = int(config["num_attention_heads"])
        self.eps = np.float32(config.get("layer_norm_eps", 1e-12))
        max_positions = int(config.get("max_position_embeddings", 512))
        self.max_length = min(int(st_config.get("max_seq_length") or max_positions), max_positions)
        self.lower = bool(st_config.get("do_lower_case", False))

        w = load_file(str(root / "model.safetensors"))
        if "bert.embeddings.word_embeddings.weight" in w:  # saved from a BertFor... head
            w = {k.removeprefix("bert."): v for k, v in w.items()}
        w = {k: np.asarray(v, dtype=np.float32) for k, v in w.items() if v.dtype.kind == "f"}
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"]
        self.ln0 = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = [
            _Layer(w, f"encoder.layer.{i}.") for i in range(int(config["num_hidden_layers"]))
        ]
        self.dim = int(self.word.shape[1])

        # As transformers' fast tokenizer is called by sentence-transformers: truncated to the
        # model's max_seq_length, padded to the longest text of the batch.
        self.tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_length)
        pad_id = int(config.get("pad_token_id") or 0)
        pad_token = self.tokenizer.id_to_token(pad_id) or "[PAD]"
        self.tokenizer.enable_padding(pad_id=pad_id, pad_token=pad_token)

    def _layer_norm(self, x: np.ndarray, weight_bias: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        x -= x.mean(-1, keepdims=True)
        var = np.einsum("ij,ij->i", x, x)[:, None]
        var /= np.float32(x.shape[-1])
        var += self.eps
        np.sqrt(var, out=var)
        x /= var
        x *= weight_bias[0]
        x += weight_bias[1]
        return x

    def encode(self, texts: list[str]) -> np.ndarray:
        """One unit-length float32 vector per text (``len(texts)`` x :attr:`dim`)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        batch = [t.strip().lower() if self.lower else t.strip() for t in texts]
        encodings = self.tokenizer.encode_batch(batch)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        b, n = ids.shape
        d = self.dim
        heads = self.heads
        head_dim = d // heads

        x = self.word[ids]
        x += self.position[:n]
        x += self.token_type[types]
        x = self._layer_norm(x.reshape(b * n, d), self.ln0)
        # Padding gets the lowest float added to its scores, as transformers does.
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        scale = np.float32(1 / math.sqrt(head_dim))
        for layer in self.layers:
            qkv = x @ layer.qkv_w
            qkv += layer.qkv_b
            qkv = qkv.reshape(b, n, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
            scores = qkv[0] @ qkv[1].transpose(0, 1, 3, 2)
            scores *= scale
            scores += bias
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(b * n, d)
            h = context @ layer.out_w
            h += layer.out_b
            h += x
            h = self._layer_norm(h, layer.ln1)
            up = h @ layer.up_w
            up += layer.up_b
            for start in range(0, b * n, _ROWS):
                up[start : start + _ROWS] = gelu(up[start : start + _ROWS])
            out = up @ layer.down_w
            out += layer.down_b
            out += h
            x = self._layer_norm(out, layer.ln2)

        # Mean of the real tokens' vectors, then unit length (sentence-transformers' Pooling
        # and Normalize, with their epsilons).
        tokens = x.reshape(b, n, d)
        summed = np.einsum("bnd,bn->bd", tokens, mask)
        summed /= np.maximum(mask.sum(1, keepdims=True), np.float32(1e-9))
        norms = np.linalg.norm(summed, axis=1, keepdims=True)
        summed /= np.maximum(norms, np.float32(1e-12))
        return summed.astype(np.float32, copy=False)
