"""Daily sharded ads-ranking retraining on Ray, orchestrated by Dagster."""

__version__ = "0.1.0"
