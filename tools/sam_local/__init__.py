"""SAM local tooling: run the built bundle's functions in Lambda containers against moto, with
the turn state machine executed and every Task invoked through `sam local start-lambda`
(README "Test with SAM local"; `python -m tools.sam_local test|up`)."""
