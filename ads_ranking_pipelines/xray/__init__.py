"""X-Ray: a web UI listing running clusters."""
