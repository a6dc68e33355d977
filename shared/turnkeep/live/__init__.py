"""Watching a turn on AWS: the WebSocket API's subscriptions (`connections`), its `$connect`
authorizer (`authorizer`), its routes (`websocket`) and the steps' pusher (`push`). An entry
point beside `api` (whose read models shape the events); the local stream's hub is
`turnkeep.api.hub`. What a step hands over is `turnkeep.harness.live`."""
