"""Fakes shared by the tests and the benches."""
