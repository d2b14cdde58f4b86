"""Storage under one root URI: events, model versions, scores. Pure pyarrow.fs, no Dagster."""
