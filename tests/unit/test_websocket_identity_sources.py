"""template.yaml's WebSocket authorizer against API Gateway's identity-source rule, as the
stand-in gateway (tests/support/ws_gateway.py) models it: a REQUEST authorizer runs only when
every identity source is present."""

from __future__ import annotations

from tests.support.ws_gateway import identity_sources, missing_identity


def test_a_connect_lacking_an_identity_source_is_refused_before_the_authorizer() -> None:
    sources = ("route.request.querystring.token", "route.request.header.X-Key")

    assert missing_identity(sources, {"authorization": "Bearer t"}, {}) == list(sources)
    assert missing_identity(sources, {"x-key": "k"}, {"token": "t"}) == []
    assert missing_identity(sources, {"X-Key": "k"}, {"token": ""}) == [sources[0]]


def test_the_clis_header_and_the_browsers_ticket_both_reach_the_templates_authorizer() -> None:
    sources = identity_sources()

    assert missing_identity(sources, {"Authorization": "Bearer a.b.c"}, {}) == []
    assert missing_identity(sources, {}, {"ticket": "t-1"}) == []
