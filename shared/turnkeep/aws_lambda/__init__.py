"""What the Lambda handlers in `functions/` stand on: the container's runtime (`container`),
the Powertools Tracer (`tracing`) and the Step Functions task payloads (`step_events`)."""
