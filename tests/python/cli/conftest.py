"""These tests need neither Spark nor the native engine (a fake ``_core`` stands in)."""

import fake_core

fake_core.install()
