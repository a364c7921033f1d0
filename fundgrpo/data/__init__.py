"""Data: the synthetic universe, ingestion of any source into the canonical table, and its validation."""
