"""Benchmarks: standalone scripts that measure the platform against public practice."""
