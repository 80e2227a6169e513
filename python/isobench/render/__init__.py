"""Rendering: tables, the report and its plots, all read from a run's summary document."""
