"""Ray job entrypoints: thin drivers that open Dagster Pipes and call ``training``."""
