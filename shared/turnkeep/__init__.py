"""turnkeep: durable AI-agent turns on AWS serverless."""

__version__ = "0.1.0"
