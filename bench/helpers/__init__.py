"""Modules the benchmarks in bench/ share (not benchmarks themselves: CI runs bench/*.py only)."""
