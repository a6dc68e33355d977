"""The attachments' context policy (providers/attachment_budget.py)."""

from __future__ import annotations

from tests.support.attachment_samples import attachment, pdf, png
from turnkeep.harness import HarnessLimits
from turnkeep.harness.context import message_tokens, plan_context
from turnkeep.harness.transcript import BranchView, ViewItem
from turnkeep.providers.attachment_budget import (
    PDF_PAGE_TOKENS,
    UNKNOWN_IMAGE_TOKENS,
    attachment_tokens,
    attachment_view,
    claude_image_tokens,
    image_size,
    openai_image_tokens,
)
from turnkeep.providers.base import AttachmentPart, Message, TextPart, ToolResultPart
from turnkeep.providers.context import ContextWindow


def _user(*parts: TextPart | AttachmentPart) -> Message:
    return Message("user", tuple(parts))


def _reply(text: str = "ok") -> Message:
    return Message("assistant", (TextPart(text),))


def test_png_dimensions_are_read_from_the_header() -> None:
    assert image_size(png(width=640, height=480).data) == (640, 480)
    assert image_size(b"not an image") is None


def test_image_tokens_follow_the_published_formulas() -> None:
    # Anthropic: 1000 x 1000 px is about 1334 tokens (w*h/750); over 1568 px it is scaled first.
    assert claude_image_tokens(1000, 1000) == 1334
    assert claude_image_tokens(3136, 3136) == claude_image_tokens(1568, 1568)
    # OpenAI: 1024 x 1024 scales to 768 x 768, four 512 px tiles: 85 + 170*4.
    assert openai_image_tokens(1024, 1024) == 765
    assert openai_image_tokens(2048, 4096) == 85 + 170 * 6


def test_an_image_counts_the_larger_formula_and_a_pdf_by_its_pages() -> None:
    image = png(width=1000, height=1000)

    assert attachment_tokens(image) == 1334
    assert attachment_tokens(pdf()) == PDF_PAGE_TOKENS
    assert attachment_tokens(attachment("a.csv", "text/csv", b"a,b\n" * 100)) == 100


def test_a_message_with_an_image_costs_its_image_tokens() -> None:
    plain = message_tokens(_user(TextPart("see")))

    assert message_tokens(_user(TextPart("see"), png(width=1000, height=1000))) == plain + 1334


def test_an_image_is_resent_for_two_more_turns_then_becomes_a_text_reference() -> None:
    image = png("chart.png")
    history = [_user(TextPart("look"), image), _reply()]
    for n in range(3):
        history += [_user(TextPart(f"turn {n}")), _reply()]

    def sent(messages: list[Message]) -> Message:
        return attachment_view(messages)[0]

    assert image in sent(history[:6]).parts  # its own turn and the next two
    first = sent(history)
    assert image not in first.parts
    reference = first.parts[1]
    assert isinstance(reference, TextPart)
    assert "chart.png" in reference.text
    assert image.attachment_id in reference.text


def test_documents_stay_but_only_the_newest_five_are_sent() -> None:
    docs = [pdf(f"d{i}.pdf") for i in range(7)]
    history = [m for d in docs for m in (_user(TextPart("read"), d), _reply())]

    sent = attachment_view(history)

    kept = [p for m in sent for p in m.parts if isinstance(p, AttachmentPart)]
    assert [p.name for p in kept] == [f"d{i}.pdf" for i in range(2, 7)]


def test_an_old_tool_image_leaves_the_result_as_a_note_in_its_text() -> None:
    shot = png("shot.png")
    result = ToolResultPart("c1", "screenshot", "took it", attachments=(shot,))
    history = [_user(TextPart("go")), Message("tool", (result,)), _reply()]
    history += [m for n in range(3) for m in (_user(TextPart(f"t{n}")), _reply())]

    old = attachment_view(history)[1].parts[0]

    assert isinstance(old, ToolResultPart)
    assert old.attachments == ()
    assert old.content.startswith("took it\n[image shot.png")
    assert attachment_view(history[:3])[1].parts[0] == result


def test_a_reference_without_bytes_counts_by_its_size_and_an_image_by_the_most_it_can_cost() -> (
    None
):
    image = AttachmentPart("att-1", "a.png", "image/png", 5_000)
    scan = AttachmentPart("att-2", "scan.pdf", "application/pdf", 250_000)
    notes = AttachmentPart("att-3", "notes.txt", "text/plain", 400)

    assert attachment_tokens(image) == UNKNOWN_IMAGE_TOKENS
    assert attachment_tokens(scan) == 3 * PDF_PAGE_TOKENS
    assert attachment_tokens(notes) == 100
    assert claude_image_tokens(4000, 4000) <= UNKNOWN_IMAGE_TOKENS


def test_old_images_the_policy_retires_do_not_push_the_plan_into_leaving_turns_out() -> None:
    # Ten turns, each with a 1000 x 1000 image (1334 tokens): sent whole only the last three
    # carry their image, about 4,000 tokens; costed naively the images alone are 13,340.
    items = []
    for n in range(10):
        image = png(f"p{n}.png", width=1000, height=1000)
        ask = Message("user", (TextPart(f"turn {n}"), image))
        items += [ViewItem(f"u{n}", ask, True, None), ViewItem(f"a{n}", _reply(), False, None)]
    view = BranchView(tuple(items), None, 1.0)

    plan = plan_context(
        view,
        system="",
        tools=(),
        pending=(),
        window=ContextWindow(8_000, 1_000),
        limits=HarnessLimits(context_threshold=0.9, context_keep=0.5),
    )

    assert plan.action == "none"
