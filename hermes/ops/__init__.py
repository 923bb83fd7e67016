"""Operator surfaces: health, readiness, metrics, the dashboard, watchdogs, doctor, service."""
