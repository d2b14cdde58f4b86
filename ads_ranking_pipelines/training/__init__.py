"""Code that runs inside Ray workers. Imports neither Dagster nor the backends."""
