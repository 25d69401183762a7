"""The code blocks of the project's Markdown pages, for the tests that run them as
written (tests/python/test_readme.py, spark/test_doc_examples.py, spark/test_kafka.py)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def python_blocks(page: str) -> list[str]:
    """The ```` ```python ```` blocks of ``page`` (a path from the repository's root),
    in order; fails if it has none."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), flags=re.S)
    assert blocks, f"{page} has no python block"
    return blocks
