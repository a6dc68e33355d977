"""Your agents: each package here is one agent, named by
`TURNKEEP_AGENT=turnkeep_agents.<package>:agent`.

`sam build` ships this directory in the Lambda layer beside turnkeep (with the packages of
`requirements.txt` next to this file); locally it is importable from the repository's
`shared/` (docs/agent.md, "Where the code lives").
"""
