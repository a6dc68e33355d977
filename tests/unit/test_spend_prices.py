"""Prices: the Bedrock table, the `price` setting and spec option over it, zero for local
servers unless set, and a round's cost in integer micro-dollars rounded up (docs/usage.md)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from turnkeep.providers.base import Usage
from turnkeep.providers.factory import provider_from_config
from turnkeep.providers.prices import BEDROCK_PRICES, Price, bedrock_price, parse_price
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.providers.settings import ModelSettings
from turnkeep.spend.pricing import price_for, priced

HAIKU = "anthropic.claude-3-5-haiku-20241022-v1:0"


def test_a_round_costs_each_token_kind_at_its_price_in_micro_dollars() -> None:
    price = parse_price("0.8,4,0.08,1")
    usage = Usage(
        input_tokens=1_000, output_tokens=500, cache_read_tokens=10_000, cache_write_tokens=2_000
    )

    # 1000*0.8 + 500*4 + 10000*0.08 + 2000*1 = 5600 micro-dollars.
    assert price.cost_micros(usage) == 5_600
    assert priced(usage, price) == Usage(1_000, 500, 10_000, 2_000, cost_micros=5_600)


def test_a_started_micro_dollar_counts_so_a_tiny_round_never_costs_zero() -> None:
    assert Price(input=3_000_000, output=0).cost_micros(Usage(input_tokens=1)) == 3
    assert Price(input=35_000, output=0).cost_micros(Usage(input_tokens=1)) == 1


def test_an_estimated_round_is_priced_and_stays_marked_estimated() -> None:
    usage = priced(Usage(input_tokens=100, estimated=True), parse_price("1,1"))

    assert (usage.cost_micros, usage.estimated) == (100, True)


def test_bedrock_models_are_priced_from_the_table_profiles_and_arns_included() -> None:
    assert bedrock_price(HAIKU) == Price(800_000, 4_000_000, 80_000, 1_000_000, verified=False)
    assert bedrock_price("us.anthropic.claude-sonnet-4-20250514-v1:0") == bedrock_price(
        "anthropic.claude-3-7-sonnet-20250219-v1:0"
    )
    arn = "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.amazon.nova-lite-v1:0"
    assert bedrock_price(arn) == bedrock_price("amazon.nova-lite-v1:0")
    assert bedrock_price("cohere.command-r-v1:0") is None


def test_the_specific_claude_rows_come_before_their_family() -> None:
    opus_45 = bedrock_price("anthropic.claude-opus-4-5-20251101-v1:0")
    opus_4 = bedrock_price("anthropic.claude-opus-4-20250514-v1:0")

    assert opus_45 is not None
    assert opus_4 is not None
    assert opus_45.input < opus_4.input
    assert len({pattern.pattern for pattern, _ in BEDROCK_PRICES}) == len(BEDROCK_PRICES)


def test_a_bedrock_provider_is_charged_at_its_table_row_and_a_spec_option_overrides_it() -> None:
    provider = provider_from_config(f"bedrock:{HAIKU}?region=us-east-1")
    overridden = provider_from_config(f"bedrock:{HAIKU}?region=us-east-1&price=1,2")

    assert price_for(provider) == bedrock_price(HAIKU)
    assert price_for(overridden) == Price(1_000_000, 2_000_000)


def test_the_agents_price_setting_wins_over_the_spec_and_the_table() -> None:
    provider = provider_from_config(f"bedrock:{HAIKU}?region=us-east-1&price=1,2")

    assert price_for(provider, ModelSettings(price="0.5,0.5,0.1,0.2")) == Price(
        500_000, 500_000, 100_000, 200_000
    )


def test_local_servers_and_the_scripted_model_cost_zero_unless_a_price_is_set() -> None:
    local = provider_from_config("openai:http://127.0.0.1:11434/v1#llama3.1")
    priced_local = provider_from_config("openai:http://127.0.0.1:11434/v1#llama3.1?price=0.1,0.2")

    assert price_for(local).cost_micros(Usage(10**6, 10**6)) == 0
    assert price_for(ScriptedProvider()).cost_micros(Usage(10**6, 10**6)) == 0
    assert price_for(priced_local) == Price(100_000, 200_000)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("3", "must be input,output"),
        ("1,2,3,4,5", "must be input,output"),
        ("abc,1", "is not a number"),
        ("-1,1", "must be >= 0"),
        ("0.0000001,1", "at most 6 decimals"),
        ("nan,1", "must be >= 0"),
    ],
)
def test_a_malformed_price_is_refused_with_a_message_naming_it(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_price(text)
    with pytest.raises(ValidationError, match=message):
        ModelSettings(price=text)
