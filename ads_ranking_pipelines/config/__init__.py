"""Pure configuration models (pydantic). Imports nothing from the rest of the package."""
