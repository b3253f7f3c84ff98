"""Helpers shared by more than one test module (fixtures stay in the conftest files, fakes in tests/fakes)."""
