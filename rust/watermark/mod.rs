//! Watermark generation and combination (placeholder until the watermark core lands).
