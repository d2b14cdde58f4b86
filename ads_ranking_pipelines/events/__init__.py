"""Impression events: the synthetic generator and the event-parquet layout."""
