"""The HTML report: self-contained, every chart embedded and non-blank, at 4, 16 and
1,000 partitions.

Two checks: the page is parsed and each embedded PNG decoded (always); and, when a
``chromium`` binary is installed (Debian package ``chromium``), the page is rendered
headless and the screenshot must not be blank and must show every chart's colours.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import re
import shutil
import subprocess
import time
import warnings
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import PIL.Image
import pytest
import synthetic

from floodmark.report import ReportInputs
from floodmark.report.html import write_report

#: Every chart of a full run, by the id of its figure (``fig-<name>``).
CHARTS = ["watermark", "watermarks", "lag", "holding", "idle", "partitions", "delay", "bounds"]
#: The charts that read at any number of partitions (no per-partition line chart).
SCALING = [c for c in CHARTS if c not in ("watermarks", "bounds")]


class Page(HTMLParser):
    """Collects every ``<img>`` (figure id, alt, src) and every ``href``/``src`` that
    is not a data URI or an anchor."""

    def __init__(self) -> None:
        super().__init__()
        self.images: dict[str, tuple[str, str]] = {}
        self.links: list[str] = []
        self._figure = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for name in ("src", "href"):
            value = values.get(name)
            if value and not value.startswith(("data:", "#")):
                self.links.append(value)
        if tag == "figure":
            self._figure = (values.get("id") or "").removeprefix("fig-")
        if tag == "img":
            self.images[self._figure] = (values.get("alt") or "", values.get("src") or "")


def parse(page: Path) -> tuple[str, Page]:
    text = page.read_text(encoding="utf-8")
    parser = Page()
    parser.feed(text)
    return text, parser


def check_self_contained(page: Path) -> Page:
    """No network reference; every link is a file beside the page."""
    text, parser = parse(page)
    without_images = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]*", "", text)
    assert not re.search(r"https?:|//[a-z]", without_images)
    for link in parser.links:
        assert "/" not in link and (page.parent / link).is_file(), link
    return parser


def colours(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct colours (packed ``0xRRGGBB``) of an RGB(A) uint8 image and how many
    pixels have each."""
    pixels = rgb[..., :3].astype(np.uint32)
    packed = (pixels[..., 0] << 16) | (pixels[..., 1] << 8) | pixels[..., 2]
    counts = np.bincount(packed.ravel(), minlength=1 << 24)
    present = np.flatnonzero(counts)
    return present, counts[present]


def distinct_colours(rgb: np.ndarray) -> int:
    return len(colours(rgb)[0])


def pixels_near(palette: tuple[np.ndarray, np.ndarray], colour: str, tolerance: int) -> int:
    """Pixels within ``tolerance`` (per channel, 0-255) of ``colour`` (``#rrggbb``)."""
    packed, counts = palette
    channels = np.stack([(packed >> shift) & 0xFF for shift in (16, 8, 0)], axis=-1)
    target = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
    near = np.abs(channels.astype(np.int64) - target).max(axis=-1) <= tolerance
    return int(counts[near].sum())


def decode_png(uri: str) -> np.ndarray:
    prefix = "data:image/png;base64,"
    assert uri.startswith(prefix)
    data = base64.b64decode(uri[len(prefix) :])
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return read_png(io.BytesIO(data))


def read_png(source: Path | io.BytesIO) -> np.ndarray:
    """An image as RGB uint8."""
    with PIL.Image.open(source) as image:
        return np.asarray(image.convert("RGB"))


def check_images(parser: Page, expected: list[str]) -> None:
    assert sorted(parser.images) == sorted(expected)
    for name, (alt, src) in parser.images.items():
        assert alt, name
        image = decode_png(src)
        height, width = image.shape[:2]
        assert width >= 400 and height >= 150, name
        assert distinct_colours(image) > 20, name


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(tmp_path_factory.mktemp("report"), synthetic.inputs(), max_late=0.05)


def test_files_written(page: Path) -> None:
    names = {p.name for p in page.parent.iterdir()}
    pngs = {"watermark", "watermarks", "lag", "holding", "idle", "partitions", "bounds"}
    csvs = {"timeline", "lag", "holding", "idle_spans", "partitions", "delay", "bounds"}
    assert (
        {"index.html", "firing_delay.png"} | {f"{n}.png" for n in pngs} | {f"{n}.csv" for n in csvs}
    ) <= names


def test_every_chart_is_embedded_and_not_blank(page: Path) -> None:
    parser = check_self_contained(page)
    check_images(parser, CHARTS)
    text = page.read_text(encoding="utf-8")
    for caption in (
        "Combined watermark over arrival time",
        "Each partition&#x27;s watermark",
        "Lag behind the leading partition",
        "Partitions holding the watermark back",
        "Idle partitions",
        "Late and dropped records per partition",
        "Window firing delay",
        "against the bound",
    ):
        assert caption in text
    # The timeline is a chart and a linked CSV now, not a table in the page.
    assert '<a href="timeline.csv">' in text and "none yet" not in text
    assert "none yet" in (page.parent / "timeline.csv").read_text()


def test_partial_inputs_still_render(tmp_path: Path) -> None:
    inputs = ReportInputs(partitions=synthetic.partitions())
    page = write_report(tmp_path, inputs)
    _, parser = parse(page)
    assert list(parser.images) == ["partitions"]


def test_the_compact_tables_alone_draw_the_partitions(tmp_path: Path) -> None:
    """Given the lag, holding and idle tables (computed in Spark, say), the report needs
    no emissions: everything but the per-partition line chart is drawn."""
    from floodmark.report.partition_views import with_views

    full = with_views(synthetic.many_inputs(16))
    page = write_report(tmp_path, dataclasses.replace(full, emissions=None))
    check_images(check_self_contained(page), SCALING)


def test_many_partitions_cut_the_table_to_the_worst_and_totals(tmp_path: Path) -> None:
    page = write_report(tmp_path, synthetic.many_inputs(200), top=5)
    text = page.read_text(encoding="utf-8")
    section = text[text.index('id="partitions"') :]
    table = section[section.index("<tbody>") : section.index("</tbody>")]
    rows = re.findall(r"<tr><td>([^<]*)</td>", table)
    assert rows == [str(synthetic.IDLE), str(synthetic.LAGGING), *rows[2:5], "all 200"]
    assert len((tmp_path / "partitions.csv").read_text().splitlines()) == 201


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if path := shutil.which(name):
            return path
    return None


def screenshot(page: Path, shot: Path, height: int) -> np.ndarray:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no chromium binary on PATH (Debian: apt-get install chromium)")
    subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={shot}",
            f"--window-size=1200,{height}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return read_png(shot)


def test_headless_screenshot_is_not_blank(page: Path, tmp_path: Path) -> None:
    image = screenshot(page, tmp_path / "page.png", 3000)
    assert image.shape[:2] == (3000, 1200)
    assert distinct_colours(image) > 50  # text, tables and the charts' colours
    # The combined watermark chart and the line chart's red strips are on screen.
    rgb = image.astype(int)
    red = (rgb[..., 0] > 180) & (rgb[..., 1] < 80) & (rgb[..., 2] < 80)
    assert red.sum() > 500


@pytest.mark.parametrize("partitions", [16, 1_000])
def test_report_reads_at_many_partitions(partitions: int, tmp_path: Path) -> None:
    """At 16 and 1,000 partitions: every chart is in the page, the page names no
    network resource, its CSV links resolve, and headless Chromium draws it all."""
    from floodmark.report.charts import IDLE_COLOUR
    from floodmark.report.partition_charts import HOLD_COLOUR

    inputs = synthetic.many_inputs(partitions)
    started = time.perf_counter()
    page = write_report(tmp_path / "report", inputs)
    rendered = time.perf_counter() - started
    assert rendered < 15, rendered
    parser = check_self_contained(page)
    expected = CHARTS if partitions <= 20 else [c for c in CHARTS if c != "watermarks"]
    check_images(parser, [c for c in expected if c != "bounds"])
    assert {"timeline.csv", "lag.csv", "holding.csv", "idle_spans.csv", "partitions.csv"} <= set(
        parser.links
    )
    lag_rows = len((page.parent / "lag.csv").read_text().splitlines()) - 1
    assert lag_rows == partitions * 200
    image = screenshot(page, tmp_path / "page.png", 7000)
    assert image.shape[:2] == (7000, 1200)
    palette = colours(image)
    assert len(palette[0]) > 100
    # Each partition chart's own colour reached the screen: the idle blue (heatmap,
    # idle spans), the holding bars, and the laggard's darkest red in the heatmap.
    assert pixels_near(palette, IDLE_COLOUR, 12) > 2_000
    assert pixels_near(palette, HOLD_COLOUR, 4) > 2_000
    assert pixels_near(palette, "#800026", 10) > 2_000


def test_without_an_arrival_clock_no_delay_is_shown(tmp_path: Path) -> None:
    """Arrival times that are row positions (no ``--arrival``) are no clock: no firing
    delay (it came out near -1.7e9 s: row ticks minus epoch window ends), no
    watermark lag behind the arrival clock, and the summary says why."""
    from floodmark.report.summary import render_summary

    inputs = dataclasses.replace(synthetic.inputs(), arrival_clock=False)
    page = write_report(tmp_path, inputs)
    _, parser = parse(page)
    assert "delay" not in parser.images and "watermark" in parser.images
    assert not (tmp_path / "delay.csv").exists()
    text = render_summary(inputs)
    assert "n/a (no arrival column: records in row order)" in text
    assert " s, p99 " not in text
    assert "median" in render_summary(synthetic.inputs())


def test_partition_names_are_drawn_as_written_and_far_times_are_drawn(tmp_path: Path) -> None:
    """A partition named like a mathtext formula (``$\\foo$``: no such symbol) failed the
    whole report, and a watermark at a sentinel time (9999-12-31) or before year 100
    failed matplotlib's date axis; both are drawn now, and the CSV keeps the time."""
    import pyarrow as pa

    names = {0: "$\\foo$", 1: "cost $5 and $6", 2: "<b>&", 3: "分区"}

    def renamed(table: pa.Table, column: str) -> pa.Table:
        values = [names[v] for v in table[column].to_pylist()]
        return table.set_column(table.schema.get_field_index(column), column, pa.array(values))

    base = synthetic.inputs()
    timeline = renamed(base.timeline, "min_channel")
    wms = timeline["watermark"].to_numpy().copy()
    wms[-1] = 253_402_300_799_000  # 9999-12-31T23:59:59Z in ms
    timeline = timeline.set_column(1, "watermark", pa.array(wms))
    emissions = renamed(base.emissions, "channel")
    ems = emissions["watermark"].to_numpy(zero_copy_only=False).copy()
    ems[np.flatnonzero(~np.isnan(ems))[5]] = -62_135_510_400_000  # year 1 in ms
    emissions = emissions.set_column(3, "watermark", pa.array(ems, pa.int64(), from_pandas=True))
    inputs = dataclasses.replace(
        base,
        timeline=timeline,
        emissions=emissions,
        partitions=renamed(base.partitions, "partition"),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing glyph (CJK) warns nothing either
        page = write_report(tmp_path, inputs, max_late=0.05)
    check_images(check_self_contained(page), CHARTS)
    assert "9999-12-31T23:59:59" in (tmp_path / "timeline.csv").read_text()
    assert "&lt;b&gt;&amp;" in page.read_text(encoding="utf-8")


def test_a_single_delay_near_the_int64_end_is_drawn(tmp_path: Path) -> None:
    """One firing delay of ~9e15 s (event times near ``Long.MAX``): the histogram could
    not make 10 bins of v +- 0.5 (a float cannot tell them apart) and the report
    failed; far dates warn nothing on the terminal either."""
    import pyarrow as pa

    from floodmark.report import ReportInputs

    firings = pa.table(
        {
            "window_end": pa.array([2**63 - 11_000]),
            "fired_at": pa.array([3_000]),
            "timing": ["on_time"],
            "firings": pa.array([1]),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        page = write_report(tmp_path, ReportInputs(firings=firings))
    check_self_contained(page)
    assert (tmp_path / "firing_delay.png").stat().st_size > 0
