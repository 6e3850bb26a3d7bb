"""The reliability suite's figures: each test that measures one writes it here, ``make reliability`` reports them.

Why a file per figure and not pytest's output: the figures are the deliverable (docs/reliability.md, with the date
and the commit), and a test that passes must still say what it counted. ``METALPLANE_RELIABILITY_DIR`` names the
directory (``make reliability`` sets it); without it nothing is written and the tests only assert.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ENV = "METALPLANE_RELIABILITY_DIR"


def record(part: str, figures: dict[str, Any], counts: str) -> None:
    """Write ``figures`` of suite part ``part`` (``counts`` says what they count) when the suite asks for them."""
    directory = os.environ.get(ENV)
    if not directory:
        return
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    (path / f"{part}.json").write_text(json.dumps({"part": part, "figures": figures, "counts": counts}, indent=2))
