"""The attachment routes: declare, upload (the local PUT), list, get, delete; a turn naming
attachments by id, refused with a 4xx naming the one that is not ready or not this
session's (docs/api.md "Attachments")."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.support import attachment_files as files
from tests.support.api_client import OTHER, ApiHarness, auth


def _declare(
    api: ApiHarness, sid: str, data: bytes, name: str, media_type: str, *, user: str = "alice"
) -> Any:
    response = api.client.post(
        f"/sessions/{sid}/attachments",
        json={
            "name": name,
            "media_type": media_type,
            "size": len(data),
            "sha256": files.sha256(data),
        },
        headers=auth(user),
    )
    return response


def _upload(api: ApiHarness, sid: str, data: bytes, name: str, media_type: str) -> Any:
    created = _declare(api, sid, data, name, media_type)
    assert created.status_code == 201, created.text
    upload = created.json()["upload"]
    assert upload["method"] == "PUT"
    return api.client.put(upload["url"], content=data, headers={**auth(), **upload["headers"]})


def test_a_declared_attachment_is_pending_then_ready_after_its_bytes_arrive(
    api: ApiHarness,
) -> None:
    sid = api.session()
    png = files.image("PNG", (30, 20))
    created = _declare(api, sid, png, "shot.png", "image/png")
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["attachment"]["status"] == "pending"
    assert body["attachment"]["id"].startswith("att-")
    assert (
        body["upload"]["url"] == f"/sessions/{sid}/attachments/{body['attachment']['id']}/content"
    )
    done = api.client.put(
        body["upload"]["url"], content=png, headers={**auth(), "Content-Type": "image/png"}
    )
    assert done.status_code == 200, done.text
    assert (done.json()["status"], done.json()["width"], done.json()["height"]) == ("ready", 30, 20)
    listed = api.client.get(f"/sessions/{sid}/attachments", headers=auth()).json()["attachments"]
    assert [a["name"] for a in listed] == ["shot.png"]


def test_a_pdf_renamed_png_is_refused_with_a_one_line_reason(api: ApiHarness) -> None:
    sid = api.session()
    refused = _upload(api, sid, files.pdf(), "shot.png", "image/png")
    assert refused.status_code == 422
    assert refused.json()["error"]["message"] == (
        "'shot.png': declared 'image/png' but the bytes are a PDF (application/pdf)"
    )
    [shown] = api.client.get(f"/sessions/{sid}/attachments", headers=auth()).json()["attachments"]
    assert shown["status"] == "refused"
    assert "bytes are a PDF" in shown["error"]


@pytest.mark.parametrize(
    ("data", "name", "media_type", "needle"),
    [
        (files.tall_png(), "tall.png", "image/png", "1×100000 px"),
        (files.zip_bomb_docx(), "bomb.docx", files.DOCX_TYPE, "zip bomb"),
        (files.polyglot_png_zip(), "both.png", "image/png", "polyglot"),
    ],
)
def test_hostile_files_are_refused_with_clear_errors(
    api: ApiHarness, data: bytes, name: str, media_type: str, needle: str
) -> None:
    sid = api.session()
    refused = _upload(api, sid, data, name, media_type)
    assert refused.status_code == 422, refused.text
    assert needle in refused.json()["error"]["message"]


def test_an_oversized_upload_is_refused_at_declaration_with_413(api: ApiHarness) -> None:
    sid = api.session()
    response = api.client.post(
        f"/sessions/{sid}/attachments",
        json={
            "name": "big.png",
            "media_type": "image/png",
            "size": 4 * 1024 * 1024,
            "sha256": "0" * 64,
        },
        headers=auth(),
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "attachment_too_large"
    assert "may be 1 to 3932160 bytes" in response.json()["error"]["message"]


def test_more_bytes_than_declared_are_refused_with_413(api: ApiHarness) -> None:
    sid = api.session()
    png = files.image()
    created = _declare(api, sid, png, "a.png", "image/png").json()
    response = api.client.put(
        created["upload"]["url"],
        content=png + b"\x00" * 10,
        headers={**auth(), "Content-Type": "image/png"},
    )
    assert response.status_code == 413
    assert "were declared" in response.json()["error"]["message"]


def test_a_content_type_other_than_the_declared_one_is_refused(api: ApiHarness) -> None:
    sid = api.session()
    png = files.image()
    created = _declare(api, sid, png, "a.png", "image/png").json()
    response = api.client.put(
        created["upload"]["url"], content=png, headers={**auth(), "Content-Type": "image/gif"}
    )
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "Content-Type"


def test_another_users_session_attachments_are_a_404(api: ApiHarness) -> None:
    sid = api.session()
    assert _declare(api, sid, files.image(), "a.png", "image/png", user=OTHER).status_code == 404
    assert api.client.get(f"/sessions/{sid}/attachments", headers=auth(OTHER)).status_code == 404


def test_a_turn_with_an_attachment_reaches_the_model_with_its_bytes(api: ApiHarness) -> None:
    sid = api.session()
    png = files.image("PNG", (12, 12))
    ready = _upload(api, sid, png, "shot.png", "image/png").json()
    started = api.client.post(
        f"/sessions/{sid}/turns",
        json={"text": "look", "attachments": [ready["id"]]},
        headers=auth(),
    )
    assert started.status_code == 202, started.text
    events = api.client.get(f"/sessions/{sid}/transcript", headers=auth()).json()
    text = repr(events)
    assert (
        f"Attached: shot.png (image/png, {len(png)} bytes, sha256 {files.sha256(png)[:12]})" in text
    )
    assert ready["id"] in text


def test_a_turn_naming_another_sessions_attachment_is_refused_naming_it(api: ApiHarness) -> None:
    mine, other = api.session(), api.session()
    ready = _upload(api, other, files.image(), "a.png", "image/png").json()
    started = api.client.post(
        f"/sessions/{mine}/turns",
        json={"text": "look", "attachments": [ready["id"]]},
        headers=auth(),
    )
    assert started.status_code == 404
    assert started.json()["error"]["code"] == "attachment_not_found"
    assert ready["id"] in started.json()["error"]["message"]


def test_a_turn_naming_a_pending_attachment_is_refused_naming_it(api: ApiHarness) -> None:
    sid = api.session()
    pending = _declare(api, sid, files.image(), "a.png", "image/png").json()["attachment"]
    started = api.client.post(
        f"/sessions/{sid}/turns",
        json={"text": "look", "attachments": [pending["id"]]},
        headers=auth(),
    )
    assert started.status_code == 409
    assert (
        started.json()["error"]["message"] == f"attachment {pending['id']!r} is pending, not ready"
    )


def test_a_deleted_attachment_shows_as_removed_to_the_next_round(api: ApiHarness) -> None:
    sid = api.session()
    ready = _upload(api, sid, files.image(), "shot.png", "image/png").json()
    api.client.post(
        f"/sessions/{sid}/turns",
        json={"text": "look", "attachments": [ready["id"]]},
        headers=auth(),
    )
    deleted = api.client.delete(f"/sessions/{sid}/attachments/{ready['id']}", headers=auth())
    assert deleted.status_code == 200
    assert deleted.json()["status"] == "deleted"
    assert (
        api.client.get(f"/sessions/{sid}/attachments", headers=auth()).json()["attachments"] == []
    )
    api.start(sid, "again")
    transcript = api.client.get(f"/sessions/{sid}/transcript", headers=auth())
    assert transcript.status_code == 200, transcript.text
    [user_entry] = [e for e in transcript.json()["entries"] if e.get("round") == -1][:1]
    [reference] = [p for p in user_entry["parts"] if p["kind"] == "attachment"]
    assert reference["removed"] is True
    assert reference["attachment_id"] == ready["id"]
    assert (
        api.client.get(f"/sessions/{sid}/attachments/{ready['id']}", headers=auth()).status_code
        == 404
    )


def test_the_content_of_a_ready_attachment_reads_back_never_as_a_page(api: ApiHarness) -> None:
    sid = api.session()
    page = b"<!DOCTYPE html><html><body><script>alert(1)</script></body></html>"
    png = files.image()
    html = _upload(api, sid, page, "page.html", "text/html").json()
    shot = _upload(api, sid, png, "shot.png", "image/png").json()
    image = api.client.get(f"/sessions/{sid}/attachments/{shot['id']}/content", headers=auth())
    assert image.content == png
    assert image.headers["content-type"] == "image/png"
    doc = api.client.get(f"/sessions/{sid}/attachments/{html['id']}/content", headers=auth())
    assert doc.content == page
    assert doc.headers["content-disposition"].startswith("attachment;")
    assert doc.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in doc.headers["content-security-policy"]
    other = api.client.get(f"/sessions/{sid}/attachments/{shot['id']}/content", headers=auth(OTHER))
    assert other.status_code == 404


def test_an_upload_body_over_the_largest_attachment_is_refused_before_it_is_read(
    api: ApiHarness,
) -> None:
    sid = api.session()
    png = files.image()
    created = _declare(api, sid, png, "a.png", "image/png").json()
    huge = b"\x00" * (5 * 1024 * 1024)
    response = api.client.put(
        created["upload"]["url"], content=huge, headers={**auth(), "Content-Type": "image/png"}
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "body_too_large"
    listed = api.client.get(f"/sessions/{sid}/attachments", headers=auth()).json()
    assert listed["attachments"][0]["status"] == "pending"


def test_an_upload_body_over_one_mib_is_taken_on_the_upload_route_only(api: ApiHarness) -> None:
    sid = api.session()
    noisy = files.office("docx", {"word/media/n.bin": os.urandom(2 * 1024 * 1024)})
    created = _declare(api, sid, noisy, "big.docx", files.DOCX_TYPE).json()
    done = api.client.put(
        created["upload"]["url"], content=noisy, headers={**auth(), "Content-Type": files.DOCX_TYPE}
    )
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "ready"
    other = api.client.put(
        f"/sessions/{sid}/meta", content=b"{" + b" " * (2 * 1024 * 1024) + b"}", headers=auth()
    )
    assert other.status_code == 413


TEXT_ONLY_MODEL = "bedrock:meta.llama3-1-8b-instruct-v1:0"


@pytest.fixture
def text_model_api() -> Any:
    from tests.support.api_client import make_api_harness
    from turnkeep.api.settings import ApiSettings

    yield from make_api_harness(
        run_turns=False, settings=ApiSettings(allowed_models=[TEXT_ONLY_MODEL])
    )


def test_a_turn_sending_an_image_to_a_model_without_images_is_refused_at_its_start(
    text_model_api: ApiHarness,
) -> None:
    api = text_model_api
    sid = api.session()
    png = files.image("PNG", (12, 12))
    ready = _upload(api, sid, png, "shot.png", "image/png").json()

    refused = api.client.post(
        f"/sessions/{sid}/turns",
        json={"text": "look", "model": TEXT_ONLY_MODEL, "attachments": [ready["id"]]},
        headers=auth(),
    )

    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["field"]) == ("attachment_unsupported", "attachments")
    assert ready["id"] in error["message"]
    assert "does not take images" in error["message"]
    assert api.launcher.launched == []
    # The same image goes to the default model, which takes it.
    started = api.client.post(
        f"/sessions/{sid}/turns",
        json={"text": "look", "attachments": [ready["id"]]},
        headers=auth(),
    )
    assert started.status_code == 202, started.text


def test_listing_a_sessions_attachments_deletes_the_expired_pending_ones(api: ApiHarness) -> None:
    now = [1_800_000_000.0]
    api.runtime.deps.clock = lambda: now[0]
    sid = api.session()
    png = files.image()
    created = _declare(api, sid, png, "late.png", "image/png")
    assert created.status_code == 201, created.text
    attachment_id = created.json()["attachment"]["id"]
    now[0] += 15 * 60  # the pending time is over: the bytes never came

    one = api.client.get(f"/sessions/{sid}/attachments/{attachment_id}", headers=auth())
    assert (one.status_code, one.json()["status"]) == (200, "expired")
    listed = api.client.get(f"/sessions/{sid}/attachments", headers=auth())

    assert listed.status_code == 200
    assert listed.json()["attachments"] == []
    gone = api.client.get(f"/sessions/{sid}/attachments/{attachment_id}", headers=auth())
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "attachment_not_found"
