"""The user-facing report of a floodmark run: charts, an HTML page, a terminal summary.

Everything here works on small pyarrow tables collected from a run (the timeline, every
channel's emissions, per-partition counts, window firings), never on Spark DataFrames,
so a report can be rebuilt or tested without Spark or the native engine.

Modules: :mod:`~floodmark.report.inputs` (what a report is made of),
:mod:`~floodmark.report.figures` (the numbers), :mod:`~floodmark.report.charts` (PNG
charts), :mod:`~floodmark.report.html` (the page), :mod:`~floodmark.report.summary`
(the terminal table), :mod:`~floodmark.report.recommend` (choosing a bound).
"""

from floodmark.report.inputs import ReportInputs

__all__ = ["ReportInputs"]
