"""The capability table and the turn-start check (providers/capabilities.py)."""

from __future__ import annotations

import pytest

from tests.support.attachment_samples import attachment, pdf, png
from turnkeep.harness.attachment_checks import check_attachments
from turnkeep.providers.base import TextPart, ToolResultPart
from turnkeep.providers.capabilities import (
    ATTACHMENT_UNSUPPORTED,
    AttachmentUnsupported,
    capabilities_for,
)
from turnkeep.providers.factory import ProviderConfigError, provider_from_config

CLAUDE = "bedrock:anthropic.claude-3-5-haiku-20241022-v1:0"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def test_claude_nova_and_vision_gpt_take_images_and_pdfs() -> None:
    for spec in (CLAUDE, "bedrock:us.amazon.nova-pro-v1:0", "openai:https://x/v1#gpt-4o"):
        assert check_attachments(spec, [TextPart("look"), png(), pdf()]) is None, spec


def test_a_text_only_model_refuses_an_image_at_turn_start_naming_it() -> None:
    image = png("error.png")

    refused = check_attachments("bedrock:amazon.nova-micro-v1:0", [image])

    assert isinstance(refused, AttachmentUnsupported)
    assert refused.code == ATTACHMENT_UNSUPPORTED
    assert refused.attachment_id == image.attachment_id
    assert "error.png" in str(refused)
    assert "does not take images" in str(refused)


def test_an_unknown_local_server_takes_text_documents_but_no_images_or_pdfs() -> None:
    spec = "openai:http://127.0.0.1:11434/v1#llama3.1"
    notes = attachment("notes.md", "text/markdown", b"# hi")

    assert check_attachments(spec, [notes]) is None
    assert isinstance(check_attachments(spec, [png()]), AttachmentUnsupported)
    assert "pdf documents" in str(check_attachments(spec, [pdf()]))


def test_a_spec_may_declare_images_for_a_local_vision_model() -> None:
    spec = "openai:http://127.0.0.1:11434/v1#llava?attachments=images"

    assert check_attachments(spec, [png()]) is None
    assert capabilities_for(spec).images
    assert isinstance(check_attachments(spec + "x", [png()]), AttachmentUnsupported)


def test_a_malformed_attachments_option_is_a_configuration_error() -> None:
    with pytest.raises(ProviderConfigError, match="attachments='pictures'"):
        provider_from_config("openai:http://127.0.0.1:1/v1#m?attachments=pictures")


def test_the_factory_applies_the_declared_capabilities_to_the_provider() -> None:
    provider = provider_from_config("openai:http://127.0.0.1:1/v1#llava?attachments=images")

    assert provider.capabilities.images


def test_more_than_five_documents_for_bedrock_are_refused_with_the_limit() -> None:
    docs = [pdf(f"d{i}.pdf") for i in range(6)]

    refused = check_attachments(CLAUDE, docs)

    assert refused is not None
    assert "at most 5" in str(refused)


def test_a_docx_goes_to_claude_but_not_to_a_chat_completions_server() -> None:
    report = attachment("report.docx", DOCX, b"PK\x03\x04")

    assert check_attachments(CLAUDE, [report]) is None
    assert "docx" in str(check_attachments("openai:https://x/v1#gpt-4o", [report]))


def test_a_media_type_outside_the_accepted_list_is_refused() -> None:
    refused = check_attachments(CLAUDE, [attachment("a.tiff", "image/tiff", b"II*\x00")])

    assert refused is not None
    assert "not an image type" in str(refused)


def test_a_tool_result_carries_images_only() -> None:
    result = ToolResultPart("c1", "fetch", "", attachments=(pdf(),))

    refused = check_attachments(CLAUDE, [result])

    assert refused is not None
    assert "tool results carry images only" in str(refused)


def test_every_claude_after_claude_2_takes_images_and_claude_2_does_not() -> None:
    for model in ("anthropic.claude-sonnet-4-5-20250929-v1:0", "us.anthropic.claude-opus-4-1"):
        assert capabilities_for(f"bedrock:{model}").images, model
    assert not capabilities_for("bedrock:anthropic.claude-v2:1").images
    assert not capabilities_for("bedrock:anthropic.claude-instant-v1").images


@pytest.mark.parametrize(
    ("spec", "takes_s3"),
    [
        ("bedrock:amazon.nova-lite-v1:0", True),
        ("bedrock:us.amazon.nova-pro-v1:0", True),
        ("bedrock:global.amazon.nova-premier-v1:0", True),
        ("bedrock:amazon.nova-micro-v1:0", False),
        (CLAUDE, False),
        ("bedrock:us.anthropic.claude-sonnet-4-20250514-v1:0", False),
        ("bedrock:meta.llama3-2-90b-instruct-v1:0", False),
        ("openai:https://x/v1#gpt-4o", False),
        ("scripted", False),
    ],
)
def test_only_nova_lite_pro_and_premier_take_s3_sources(spec: str, takes_s3: bool) -> None:
    # AWS's "Supported models and model features" table, "Amazon S3 links for media".
    assert capabilities_for(spec).s3_location is takes_s3


def test_a_bedrock_provider_reads_s3_sources_in_its_clients_region_only_for_nova() -> None:
    import boto3

    from turnkeep.providers.bedrock import BedrockProvider

    client = boto3.client(
        "bedrock-runtime",
        region_name="eu-west-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    assert BedrockProvider("eu.amazon.nova-lite-v1:0", client).s3_source_region() == "eu-west-1"
    claude = CLAUDE.removeprefix("bedrock:")
    assert BedrockProvider(claude, client).s3_source_region() is None
    assert provider_from_config("scripted").s3_source_region() is None
