"""Spend: what model rounds cost and the budgets that bound it (docs/usage.md)."""
