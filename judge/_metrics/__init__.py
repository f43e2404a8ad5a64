"""Exact-match DST metrics, one module per family (see METRICS.md for the definitions)."""
