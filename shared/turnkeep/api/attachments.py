"""Attachment routes: declare (answers where to upload), upload locally, list, get, delete
(docs/api.md "Attachments", docs/attachments.md).

One client flow on every deployment: `POST /sessions/{id}/attachments` with `{name,
media_type, size, sha256}` answers the attachment (pending) and an `upload`: on AWS a presigned
S3 POST (`method: POST`, `url`, `fields`: send the fields, then the file, as multipart form
data), locally `method: PUT` to this API's content URL (send the bytes with the declared
Content-Type). Then `GET …/attachments/{att}` shows it `ready` or `refused` with the reason.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Path, Request, Response
from pydantic import BaseModel, Field, StrictInt, StrictStr
from starlette.concurrency import run_in_threadpool

from turnkeep.api.context import ApiContext, Ctx, SessionId, User
from turnkeep.api.errors import ApiError
from turnkeep.api.models import _Body, error_responses
from turnkeep.api.settings import attachment_limits_of
from turnkeep.attachments import AttachmentNotFound, AttachmentRecord, AttachmentStore
from turnkeep.attachments.limits import IMAGE_TYPES
from turnkeep.attachments.records import Status
from turnkeep.attachments.sniff import normalize_type
from turnkeep.events.models import TranscriptPage
from turnkeep.harness.io import AttachmentRef
from turnkeep.storage import Storage

router = APIRouter(
    prefix="/sessions/{session_id}/attachments",
    tags=["attachments"],
    responses=error_responses(400, 401, 404, 405, 422, 503),
)

AttachmentId = Annotated[
    str, Path(pattern=r"^att-[0-9a-f]{24}$", max_length=28, description="attachment id")
]


class CreateAttachmentRequest(_Body):
    """An attachment to upload: what the client declares, checked against the bytes."""

    name: StrictStr = Field(max_length=255, description="file name (no path)")
    media_type: StrictStr = Field(max_length=255, description="e.g. image/png, application/pdf")
    size: StrictInt = Field(description="exact byte count")
    sha256: StrictStr = Field(max_length=64, description="hex sha256 of the bytes")


class AttachmentView(BaseModel):
    """An attachment as its session's owner sees it."""

    id: str
    name: str
    media_type: str
    size: int
    sha256: str
    status: Status
    created_at: int
    expires_at: int | None = None
    error: str | None = Field(default=None, description="why it was refused")
    width: int | None = None
    height: int | None = None


class UploadView(BaseModel):
    """Where the bytes go: `POST` (presigned S3, multipart form: `fields` then `file`) or `PUT`
    (this API; the body is the bytes, Content-Type the declared type)."""

    method: Literal["PUT", "POST"]
    url: str = Field(description="absolute (S3) or relative to the API's base URL")
    fields: dict[str, str] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)
    expires_at: int | None = None


class AttachmentCreated(BaseModel):
    """The pending attachment and where to upload its bytes."""

    attachment: AttachmentView
    upload: UploadView


class AttachmentList(BaseModel):
    """The session's attachments, oldest first (deleted ones are left out)."""

    attachments: list[AttachmentView]


def view(record: AttachmentRecord, now_ms: int) -> AttachmentView:
    """The API view of `record` at `now_ms` (a pending one past expiry shows `expired`)."""
    data: dict[str, Any] = record.model_dump()
    data["status"] = record.status_at(now_ms)
    return AttachmentView.model_validate(data)


def _store(ctx: ApiContext, storage: Storage) -> AttachmentStore:
    return AttachmentStore(storage, limits=attachment_limits_of(ctx.settings), clock=ctx.now_ms)


@router.post("", status_code=201, response_model=AttachmentCreated, responses=error_responses(413))
def create(
    ctx: Ctx, user: User, session_id: SessionId, body: CreateAttachmentRequest
) -> AttachmentCreated:
    """Declare an attachment; it stays `pending` until its bytes arrive and pass the checks."""
    ctx.owned(user, session_id)
    with ctx.storage(session_id) as storage:
        store = _store(ctx, storage)
        record = store.create(
            name=body.name, media_type=body.media_type, size=body.size, sha256=body.sha256
        )
        form = store.upload_form(record)
    if form is not None:
        upload = UploadView(
            method="POST", url=form.url, fields=form.fields, expires_at=form.expires_at_ms
        )
    else:
        upload = UploadView(
            method="PUT",
            url=f"/sessions/{session_id}/attachments/{record.id}/content",
            headers={"Content-Type": record.media_type},
            expires_at=record.expires_at,
        )
    return AttachmentCreated(attachment=view(record, ctx.now_ms()), upload=upload)


@router.put(
    "/{attachment_id}/content", response_model=AttachmentView, responses=error_responses(409, 413)
)
async def upload(
    ctx: Ctx, user: User, session_id: SessionId, attachment_id: AttachmentId, request: Request
) -> AttachmentView:
    """The bytes of a pending attachment (local deployments): checked, stored, `ready`."""
    await run_in_threadpool(ctx.owned, user, session_id)
    declared = request.headers.get("content-type", "")
    data = await request.body()

    def receive() -> AttachmentView:
        with ctx.storage(session_id) as storage:
            store = _store(ctx, storage)
            record = store.get(attachment_id)
            if record is not None and normalize_type(declared) != record.media_type:
                raise ApiError(
                    422,
                    "validation_error",
                    f"Content-Type: {declared!r}; attachment {attachment_id!r} was declared "
                    f"{record.media_type!r}",
                    field="Content-Type",
                )
            return view(store.receive(attachment_id, data), ctx.now_ms())

    return await run_in_threadpool(receive)


@router.get("", response_model=AttachmentList)
def list_attachments(ctx: Ctx, user: User, session_id: SessionId) -> AttachmentList:
    """The session's attachments (pending ones uploaded straight to S3 are checked now,
    expired ones deleted)."""
    ctx.owned(user, session_id)
    with ctx.storage(session_id) as storage:
        store = _store(ctx, storage)
        store.sweep()
        now = ctx.now_ms()
        views = [
            view(_finished_or_refused(store, r) if r.status_at(now) == "pending" else r, now)
            for r in store.records()
        ]
    return AttachmentList(attachments=views)


def _finished_or_refused(store: AttachmentStore, record: AttachmentRecord) -> AttachmentRecord:
    from turnkeep.attachments import AttachmentRefused

    try:
        return store.finish(record.id)
    except AttachmentRefused:
        return store.get(record.id) or record


@router.get("/{attachment_id}", response_model=AttachmentView)
def get_attachment(
    ctx: Ctx, user: User, session_id: SessionId, attachment_id: AttachmentId
) -> AttachmentView:
    """One attachment; a pending one whose bytes reached S3 is checked now (ready or refused)."""
    ctx.owned(user, session_id)
    with ctx.storage(session_id) as storage:
        store = _store(ctx, storage)
        record = store.get(attachment_id)
        if record is None or record.status == "deleted":
            raise ApiError(
                404,
                "attachment_not_found",
                f"attachment {attachment_id!r} was not found in this session",
            )
        return view(_finished_or_refused(store, record), ctx.now_ms())


@router.get(
    "/{attachment_id}/content",
    response_class=Response,
    responses={200: {"content": {"application/octet-stream": {}}}, **error_responses(409)},
)
def get_content(
    ctx: Ctx, user: User, session_id: SessionId, attachment_id: AttachmentId
) -> Response:
    """The checked bytes of a ready attachment (the console's thumbnails). Never rendered as a
    page: `nosniff`, a sandboxing CSP, and documents as downloads."""
    ctx.owned(user, session_id)
    with ctx.storage(session_id) as storage:
        store = _store(ctx, storage)
        record = store.get(attachment_id)
        if record is None or record.status == "deleted":
            raise AttachmentNotFound(attachment_id)
        data = store.load(record.part()).data
    disposition = "inline" if record.media_type in IMAGE_TYPES else "attachment"
    return Response(
        data,
        media_type=record.media_type,
        headers={
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "sandbox; default-src 'none'",
            "Content-Disposition": f"{disposition}; filename*=UTF-8''{quote(record.name)}",
            "Cache-Control": "private, max-age=3600",
        },
    )


@router.delete("/{attachment_id}", response_model=AttachmentView)
def delete_attachment(
    ctx: Ctx, user: User, session_id: SessionId, attachment_id: AttachmentId
) -> AttachmentView:
    """Delete the bytes; a transcript that refers to the attachment shows it removed."""
    ctx.owned(user, session_id)
    with ctx.storage(session_id) as storage:
        return view(_store(ctx, storage).delete(attachment_id), ctx.now_ms())


def turn_attachments(ctx: ApiContext, storage: Storage, ids: list[str]) -> list[AttachmentRef]:
    """The references of the attachments a turn names: each this session's and ready, within
    the per-turn counts; else a 4xx naming the attachment (another session's or user's is
    `attachment_not_found`, like a missing one)."""
    if not ids:
        return []
    parts = _store(ctx, storage).for_turn(ids)
    return [
        AttachmentRef(
            attachment_id=p.attachment_id, name=p.name, media_type=p.media_type, size=p.size
        )
        for p in parts
    ]


def mark_removed(page: TranscriptPage, storage: Storage) -> TranscriptPage:
    """`page` with `removed: true` on each attachment reference whose attachment was deleted
    (the transcript survives a DELETE of an attachment it refers to)."""
    store: AttachmentStore | None = None
    for event in page.entries:
        for part in event.parts or ():
            refs = [part] if part.get("kind") == "attachment" else part.get("attachments", [])
            for ref in refs:
                store = store or AttachmentStore(storage)
                record = store.get(str(ref.get("attachment_id", "")))
                if record is None or record.status == "deleted":
                    ref["removed"] = True
    return page
