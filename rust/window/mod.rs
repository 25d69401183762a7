//! Event-time windows (placeholder until the window core lands).
