"""Every floodmark name the docs mention is importable from where they say it is.

The names are read from README.md and docs/*.md, not listed here: the import
statements of their fenced Python blocks (parsed with :mod:`ast`), inline code spans
that are an import (`` `from floodmark.x import Y` ``), inline code spans that
name a dotted path under ``floodmark`` (`` `floodmark.spark.window_aggregate` ``,
a trailing call ``()`` ignored), and inline code spans that start with a name some
doc imports (`` `assign_watermarks(...)` ``, `` `WatermarkStrategy.with_idleness` ``:
the name, and the attributes after it). A doc that names something that does not exist
fails here, with the file and line of the mention.
"""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", flags=re.S | re.M)
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
DOTTED = re.compile(r"floodmark(?:\.[A-Za-z_]\w*)*")
NAME_PATH = re.compile(rf"^{DOTTED.pattern}(?:\(\))?$")
# A span that uses a name: `name`, `name.attr`, `name(...)`, `name.attr(...)`.
USE = re.compile(r"^([A-Za-z_]\w*)((?:\.[A-Za-z_]\w*)*)(?:\(.*\))?$")


@dataclass(frozen=True)
class Mention:
    """``name`` (a dotted path) is said to be importable, at ``where``."""

    name: str
    where: str


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _imports(source: str) -> list[tuple[str, int]]:
    """The floodmark names a piece of Python imports, with their line in it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "floodmark":
                names += [(f"{node.module}.{a.name}", node.lineno) for a in node.names]
        elif isinstance(node, ast.Import):
            names += [(a.name, node.lineno) for a in node.names if a.name.startswith("floodmark")]
    return names


def _spans(text: str) -> list[tuple[str, int]]:
    """The inline code spans of ``text`` outside fenced blocks, with their offset."""
    fenced = [m.span() for m in FENCE.finditer(text)]
    return [
        (m.group(1).strip(), m.start())
        for m in SPAN.finditer(text)
        if not any(a <= m.start() < b for a, b in fenced)
    ]


def imports(path: Path, root: Path = ROOT) -> list[Mention]:
    """The floodmark names ``path`` imports: in fenced Python blocks and in spans."""
    text = path.read_text()
    rel = path.relative_to(root)
    found: list[Mention] = []
    for m in FENCE.finditer(text):
        if m.group(1) in ("python", "py", "pycon", ""):
            first = _line(text, m.start(2))
            code = "\n".join(
                line.removeprefix(">>> ").removeprefix("... ") for line in m.group(2).splitlines()
            )
            found += [Mention(n, f"{rel}:{first + i - 1}") for n, i in _imports(code)]
    for span, at in _spans(text):
        if span.startswith(("from floodmark", "import floodmark")):
            found += [Mention(n, f"{rel}:{_line(text, at)}") for n, _ in _imports(span)]
    return found


def mentions(path: Path, imported: dict[str, str], root: Path = ROOT) -> list[Mention]:
    """Every floodmark name ``path`` mentions; ``imported`` maps the short names the
    docs import (``window_aggregate``) to their full path."""
    text = path.read_text()
    rel = path.relative_to(root)
    found = imports(path, root)
    for span, at in _spans(text):
        where = f"{rel}:{_line(text, at)}"
        use = USE.match(span)
        if NAME_PATH.match(span):
            found.append(Mention(span.removesuffix("()"), where))
        elif use and use.group(1) in imported:
            found.append(Mention(imported[use.group(1)] + use.group(2), where))
    return found


def imported_names(docs: list[Path], root: Path = ROOT) -> dict[str, str]:
    """Short name -> full path, for every ``from floodmark... import name`` in ``docs``."""
    return {
        m.name.rsplit(".", 1)[1]: m.name
        for doc in docs
        for m in imports(doc, root)
        if "." in m.name
    }


def resolve(name: str) -> object:
    """Imports ``name``: the longest importable module prefix, then attributes."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError as e:
            if e.name is None or not ".".join(parts[:i]).startswith(e.name):
                raise  # a module that exists but imports something missing
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(name)


IMPORTED = imported_names(DOCS)
ALL = [m for doc in DOCS for m in mentions(doc, IMPORTED)]


def test_the_docs_mention_names() -> None:
    # The parser finds what the docs say: the README's imports at least.
    names = {m.name for m in ALL}
    assert {
        "floodmark.drive",
        "floodmark.spark.window_aggregate",
        "floodmark.WatermarkStrategy.for_bounded_out_of_orderness",
    } <= names
    assert len(names) > 20, sorted(names)


@pytest.mark.parametrize("name", sorted({m.name for m in ALL}))
def test_documented_name_is_importable(name: str) -> None:
    if name.startswith("floodmark.spark"):
        pytest.importorskip("pyspark")
    if name.startswith("floodmark.report"):
        pytest.importorskip("matplotlib")
    where = ", ".join(m.where for m in ALL if m.name == name)
    try:
        resolve(name)
    except (ImportError, AttributeError) as e:
        pytest.fail(f"{name} (named at {where}) is not importable: {e!r}")


def test_a_missing_name_fails(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "Use `floodmark.spark.no_such_function` or\n\n```python\n"
        "from floodmark import drive, NoSuchThing\n```\n\n"
        "then `drive(...)`, `drive.no_such_attribute` and `spark.sql.shuffle.partitions`.\n"
    )
    found = mentions(doc, imported_names([doc], tmp_path), root=tmp_path)
    assert {m.name for m in found} == {
        "floodmark.spark.no_such_function",
        "floodmark.drive",
        "floodmark.drive.no_such_attribute",
        "floodmark.NoSuchThing",
    }
    with pytest.raises(AttributeError):
        resolve("floodmark.NoSuchThing")
    with pytest.raises(AttributeError):
        resolve("floodmark.no_such_module.x")
    with pytest.raises(AttributeError):
        resolve("floodmark.drive.no_such_attribute")


@pytest.mark.parametrize(
    "package", ["floodmark.spark", "floodmark.spark.streaming", "floodmark.spark.windows"]
)
def test_the_module_map_names_every_module(package: str) -> None:
    """A package's docstring maps its modules (one question per file): each module and
    subpackage is in it as ``:mod:`.name```, and no entry names a missing one."""
    module = importlib.import_module(package)
    folder = Path(module.__file__ or "").parent
    present = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    present |= {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
    mapped = set(re.findall(r":mod:`\.(\w+)`", module.__doc__ or ""))
    assert present - mapped == set(), f"{package}: modules missing from the map"
    assert mapped - present == set(), f"{package}: the map names modules that do not exist"
