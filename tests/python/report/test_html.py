"""The HTML report: self-contained, every chart embedded and non-blank.

Two checks: the page is parsed and each embedded PNG decoded (always); and, when a
``chromium`` binary is installed (Debian package ``chromium``), the page is rendered
headless and the screenshot must not be blank.
"""

from __future__ import annotations

import base64
import io
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest
import synthetic

from floodmark.report import ReportInputs
from floodmark.report.html import write_report


class Images(HTMLParser):
    """Collects the ``src`` of every ``<img>`` and any external reference."""

    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value and not value.startswith(("data:", "#")):
                self.external.append(value)
        if tag == "img":
            self.sources.append(dict(attrs).get("src") or "")


def distinct_colours(rgb: np.ndarray) -> int:
    pixels = (rgb[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    return len(np.unique(pixels, axis=0))


def decode_png(uri: str) -> np.ndarray:
    prefix = "data:image/png;base64,"
    assert uri.startswith(prefix)
    data = base64.b64decode(uri[len(prefix) :])
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return np.asarray(mpimg.imread(io.BytesIO(data), format="png"))


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(tmp_path_factory.mktemp("report"), synthetic.inputs(), max_late=0.05)


def test_files_written(page: Path) -> None:
    names = {p.name for p in page.parent.iterdir()}
    assert {
        "index.html",
        "watermarks.png",
        "partitions.png",
        "firing_delay.png",
        "bounds.png",
        "partitions.csv",
        "delay.csv",
        "bounds.csv",
        "timeline.csv",
    } <= names


def test_every_chart_is_embedded_and_not_blank(page: Path) -> None:
    parser = Images()
    text = page.read_text(encoding="utf-8")
    parser.feed(text)
    assert parser.external == []  # self-contained
    assert len(parser.sources) == 4
    for src in parser.sources:
        image = decode_png(src)
        height, width = image.shape[:2]
        assert width >= 400 and height >= 200
        assert distinct_colours(image) > 20
    for caption in (
        "Watermarks over arrival time",
        "Late and dropped records per partition",
        "Window firing delay",
        "against the bound",
    ):
        assert caption in text
    assert "<table>" in text and "none yet" in text


def test_partial_inputs_still_render(tmp_path: Path) -> None:
    inputs = ReportInputs(partitions=synthetic.partitions())
    page = write_report(tmp_path, inputs)
    parser = Images()
    parser.feed(page.read_text(encoding="utf-8"))
    assert len(parser.sources) == 1


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if path := shutil.which(name):
            return path
    return None


def test_headless_screenshot_is_not_blank(page: Path, tmp_path: Path) -> None:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no chromium binary on PATH (Debian: apt-get install chromium)")
    shot = tmp_path / "page.png"
    subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={shot}",
            "--window-size=1200,3000",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    image = np.asarray(mpimg.imread(shot))
    assert image.shape[:2] == (3000, 1200)
    assert distinct_colours(image) > 50  # text, tables and the charts' colours
    # The watermark chart (black combined line, red min-channel strips) is on screen.
    rgb = (image[..., :3] * 255).astype(int)
    red = (rgb[..., 0] > 180) & (rgb[..., 1] < 80) & (rgb[..., 2] < 80)
    assert red.sum() > 500
