from __future__ import annotations

import json
import subprocess
import sys

import carrier.llm


def test_importing_carrier_llm_imports_neither_litellm_nor_torch() -> None:
    code = (
        "import json, sys, carrier.llm; "
        "print(json.dumps({m: m in sys.modules for m in "
        "('litellm', 'openai', 'torch', 'sentence_transformers')}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
    )
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == {
        "litellm": False,
        "openai": False,
        "torch": False,
        "sentence_transformers": False,
    }


def test_exported_names_exist() -> None:
    for name in carrier.llm.__all__:
        assert hasattr(carrier.llm, name), name
    assert sorted(carrier.llm.__all__) == sorted(set(carrier.llm.__all__))
