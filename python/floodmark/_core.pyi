"""Type stubs for the native module ``floodmark._core`` (hand-written, checked by stubtest)."""

__version__: str

# --- watermark -------------------------------------------------------------------

# --- windows ---------------------------------------------------------------------
