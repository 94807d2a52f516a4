"""Writes for analytics: gap reports, evaluation imports, steering (one module per topic)."""
