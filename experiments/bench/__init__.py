"""Benchmarks: jaxlab vs peers in one process (`python -m experiments bench NAME`)."""
