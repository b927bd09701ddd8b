"""The real ``carrier`` command with one stand-in: the hashing embedder, since the sentence
model takes seconds to load at every start. For tests whose claim is not about the embedding
model (a store switched by one setting, model faults, a reply recovered), so each subprocess
costs the command, not torch.

    python -m tests._hashed_carrier chat characters/harbor.yaml
"""

from __future__ import annotations

import sys

import carrier.assemble as assemble
from carrier.memory.fake import HashEmbedder

if __name__ == "__main__":
    assemble.default_embedder = lambda settings=None: HashEmbedder()
    from carrier.cli import main

    sys.argv = ["carrier", *sys.argv[1:]]
    main()
