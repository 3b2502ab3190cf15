"""Glue that lets serving frameworks use this codec; each subpackage needs its framework installed."""
