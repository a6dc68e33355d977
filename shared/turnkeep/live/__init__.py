"""Watching a turn as it happens: the in-process hub of `turnkeep serve` (`hub`), the event
stream's wire shapes (`wire`) and the WebSocket API's connections and pushes on AWS
(`connections`, `push`, `websocket`). What a step hands over is `turnkeep.harness.live`."""
