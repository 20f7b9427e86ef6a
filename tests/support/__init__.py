"""Helpers of the test suite, one module per concern; fixtures stay in the conftest.py files."""
