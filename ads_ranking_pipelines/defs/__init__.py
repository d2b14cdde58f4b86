"""Dagster definitions: assets, checks, resources, schedules."""
