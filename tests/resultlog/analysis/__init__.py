"""Tests of resultlog.analysis and `resultlog export`."""
