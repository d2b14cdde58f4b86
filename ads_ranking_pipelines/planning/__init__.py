"""Planning a backfill before it asks for any GPU: estimate, capacity, split and budget (pure)."""
