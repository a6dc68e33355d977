"""Developer tooling that is not part of the Lambda layer (run from the repository root)."""
