"""AWS sessions' blobs: S3 objects `{prefix}/sessions/{sid}/attachments/{name}`, under the
session's prefix so deleting the session deletes them (docs/storage.md "Blobs"). Uploads go
straight to S3 with a presigned POST whose policy pins the key, the exact length, the content
type and a tag marking the object an unchecked upload, which the bucket's lifecycle rule
expires after a day unless the check removes it (docs/attachments.md, "Expired uploads")."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from turnkeep.storage.blobs import BlobLocation, BlobStore, UploadForm, validate_blob_name
from turnkeep.storage.errors import StorageUnavailableError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


PENDING_TAG: Final = ("turnkeep-upload", "pending")
"""The tag (key, value) of an uploaded object not yet checked; template.yaml's lifecycle rule
`expire-unchecked-uploads` expires objects carrying it."""
PENDING_TAGGING: Final = (
    "<Tagging><TagSet><Tag>"
    f"<Key>{PENDING_TAG[0]}</Key><Value>{PENDING_TAG[1]}</Value>"
    "</Tag></TagSet></Tagging>"
)
"""The POST form's `tagging` field: S3's Tagging XML of `PENDING_TAG`."""

_SIGV4: dict[int, tuple[S3Client, S3Client]] = {}
_SIGV4_LOCK = threading.Lock()


def sigv4_client(client: S3Client) -> S3Client:
    """A client like `client` that presigns POSTs with SigV4: botocore presigns a POST with
    SigV2 unless `signature_version="s3v4"` was set explicitly, and S3 refuses SigV2 on buckets
    made since 2020 (docs/attachments.md, "Upload"). Made once per client."""
    with _SIGV4_LOCK:
        known = _SIGV4.get(id(client))
        if known is not None and known[0] is client:
            return known[1]
        import botocore.session
        from botocore.config import Config

        # The credentials the client signs with: botocore keeps them on its request signer.
        credentials = client._request_signer._credentials  # type: ignore[attr-defined]
        frozen = credentials.get_frozen_credentials()
        made: S3Client = botocore.session.get_session().create_client(  # type: ignore[assignment]
            "s3",
            region_name=client.meta.region_name,
            endpoint_url=client.meta.endpoint_url,
            aws_access_key_id=frozen.access_key,
            aws_secret_access_key=frozen.secret_key,
            aws_session_token=frozen.token,
            config=client.meta.config.merge(Config(signature_version="s3v4")),
        )
        _SIGV4[id(client)] = (client, made)
        return made


def _missing(exc: ClientError) -> bool:
    code = str(exc.response.get("Error", {}).get("Code", ""))
    return code in ("NoSuchKey", "404", "NotFound")


class S3Blobs(BlobStore):
    """Blobs of one session as S3 objects."""

    def __init__(self, s3: Callable[[], S3Client], bucket: str, session_prefix: str) -> None:
        self._s3 = s3
        self._bucket = bucket
        self._prefix = f"{session_prefix}attachments/"

    def key(self, name: str) -> str:
        """The object key of blob `name`."""
        return self._prefix + validate_blob_name(name)

    def location(self, name: str) -> BlobLocation | None:
        """`s3://bucket/key` of blob `name` and the region of the client's bucket (the bucket is
        the client's region's: the storage URL names one region for both)."""
        region = self._s3().meta.region_name or ""
        return BlobLocation(f"s3://{self._bucket}/{self.key(name)}", region)

    def _call(self, what: str, name: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except (BotoCoreError, ClientError) as exc:
            raise StorageUnavailableError(f"S3 could not {what} blob {name!r}: {exc}") from exc

    def _put(self, name: str, data: bytes) -> None:
        self._call(
            "store",
            name,
            lambda: self._s3().put_object(Bucket=self._bucket, Key=self.key(name), Body=data),
        )

    def _get(self, name: str) -> bytes | None:
        try:
            found = self._s3().get_object(Bucket=self._bucket, Key=self.key(name))
            return bytes(found["Body"].read())
        except ClientError as exc:
            if _missing(exc):
                return None
            raise StorageUnavailableError(f"S3 could not read blob {name!r}: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageUnavailableError(f"S3 could not read blob {name!r}: {exc}") from exc

    def _names(self) -> list[str]:
        def listed() -> list[str]:
            pages = (
                self._s3()
                .get_paginator("list_objects_v2")
                .paginate(Bucket=self._bucket, Prefix=self._prefix)
            )
            return [
                str(item["Key"])[len(self._prefix) :]
                for page in pages
                for item in page.get("Contents", [])
            ]

        names: list[str] = self._call("list", "*", listed)
        return names

    def _delete(self, name: str) -> None:
        self._call(
            "delete",
            name,
            lambda: self._s3().delete_object(Bucket=self._bucket, Key=self.key(name)),
        )

    def upload_form(
        self, name: str, *, size: int, media_type: str, expires_in: int
    ) -> UploadForm | None:
        """A presigned S3 POST: the policy pins the key (boto3 adds it), the length to exactly
        `size` bytes (`content-length-range` size..size), the Content-Type and the pending
        tag."""
        key = self.key(name)
        post = self._call(
            "presign",
            name,
            lambda: sigv4_client(self._s3()).generate_presigned_post(
                Bucket=self._bucket,
                Key=key,
                Fields={"Content-Type": media_type, "tagging": PENDING_TAGGING},
                Conditions=[
                    {"Content-Type": media_type},
                    {"tagging": PENDING_TAGGING},
                    ["content-length-range", size, size],
                ],
                ExpiresIn=expires_in,
            ),
        )
        fields = {str(k): str(v) for k, v in post["fields"].items()}
        return UploadForm(str(post["url"]), fields, int(time.time() * 1000) + expires_in * 1000)

    def settle(self, name: str) -> None:
        """The upload of blob `name` was checked: its pending tag goes, so the lifecycle rule
        never expires it (a missing object is fine)."""
        key = self.key(name)
        try:
            self._s3().delete_object_tagging(Bucket=self._bucket, Key=key)
        except ClientError as exc:
            if _missing(exc):
                return
            raise StorageUnavailableError(f"S3 could not untag blob {name!r}: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageUnavailableError(f"S3 could not untag blob {name!r}: {exc}") from exc
