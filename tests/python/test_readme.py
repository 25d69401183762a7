"""The README's engine example runs as written (keeps the README true)."""

from __future__ import annotations

from doc_blocks import python_blocks


def test_readme_engine_example_runs(capsys: object) -> None:
    engine = python_blocks("README.md")[0]  # the first block needs no Spark
    exec(compile(engine, "README.md", "exec"), {})
