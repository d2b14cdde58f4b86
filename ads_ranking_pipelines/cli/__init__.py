"""The ``ads-ranking`` command line."""
