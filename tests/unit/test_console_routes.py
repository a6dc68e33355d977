"""The console's files are served at `/` and `/console/<file>` by an app built with
`console=True` (what `turnkeep serve` builds), without a token, with a strict CSP; nothing
outside the shipped folder is reachable; the Lambda's app (no console) still answers `/` like
any unknown route (401 before routing)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.support.api_client import ApiHarness, make_api_harness
from turnkeep.api.console import STATIC_DIR


@pytest.fixture
def api() -> Iterator[ApiHarness]:
    yield from make_api_harness(run_turns=False, console=True)


def test_the_page_is_served_at_the_root_without_a_token_and_with_a_strict_csp(
    api: ApiHarness,
) -> None:
    response = api.client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/console/js/main.js">' in response.text
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp


def test_every_shipped_module_is_served_as_javascript(api: ApiHarness) -> None:
    modules = sorted(p.name for p in (STATIC_DIR / "js").glob("*.js"))
    assert {"api.js", "sse.js", "follow.js", "main.js"} <= set(modules)
    for name in modules:
        response = api.client.get(f"/console/js/{name}")
        assert response.status_code == 200, name
        assert response.headers["content-type"].startswith("text/javascript")


# Anything that would make the page load a file from elsewhere (a font, a script, a sheet).
_REMOTE = re.compile(
    r"""(?:src|href)\s*=\s*["'](?:https?:)?//|url\(\s*["']?(?:https?:)?//|@import|"""
    r"""(?:import|from)\s*\(?\s*["'](?:https?:)?//"""
)


def test_the_page_loads_nothing_from_another_origin() -> None:
    files = [p for p in STATIC_DIR.rglob("*") if p.is_file()]
    assert len(files) > 5
    for path in files:
        assert not _REMOTE.search(path.read_text(encoding="utf-8")), path
    assert _REMOTE.search('<script src="https://cdn.example/x.js">')  # the check can fail


@pytest.mark.parametrize(
    "path",
    [
        "/console/missing.js",
        "/console/..%2F__init__.py",
        "/console/%2e%2e/__init__.py",
    ],
)
def test_a_file_outside_the_shipped_folder_or_missing_is_a_404(api: ApiHarness, path: str) -> None:
    response = api.client.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_a_dot_dot_path_never_reaches_a_file_outside_the_folder(api: ApiHarness) -> None:
    response = api.client.get("/console/js/../../__init__.py")  # normalised by the client
    assert response.status_code in (401, 404)
    assert "console_router" not in response.text


def test_the_api_without_the_console_answers_the_root_like_any_unknown_route() -> None:
    for harness in make_api_harness(run_turns=False):
        assert harness.client.get("/").status_code == 401
        assert harness.client.get("/console/js/main.js").status_code == 401


def test_every_console_file_is_package_data_so_an_installed_turnkeep_serves_it() -> None:
    import tomllib
    from pathlib import PurePosixPath

    pyproject = tomllib.loads((STATIC_DIR.parents[4] / "pyproject.toml").read_text("utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["turnkeep"]
    package_root = STATIC_DIR.parents[2]  # shared/turnkeep
    for path in STATIC_DIR.rglob("*"):
        if path.is_file():
            relative = PurePosixPath(path.relative_to(package_root).as_posix())
            # A setuptools glob's `*` stays within one folder: same depth, then match.
            assert any(
                len(relative.parts) == len(PurePosixPath(p).parts) and relative.match(p)
                for p in patterns
            ), relative
