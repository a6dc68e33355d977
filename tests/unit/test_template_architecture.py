"""One template for both instruction sets: the `Architecture` parameter picks the functions'
architecture and the one layer resource built for it (SAM gives a makefile build no
architecture, so each layer resource has its own Makefile target and wheel platform)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tools.sam_local.template import ROOT, function_ids, load_template

LAYER = "AWS::Serverless::LayerVersion"
WHEEL_PLATFORM = {"arm64": "manylinux2014_aarch64", "x86_64": "manylinux2014_x86_64"}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def _layers(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == LAYER}


def test_the_architecture_parameter_defaults_to_arm64_and_allows_x86_64(
    template: dict[str, Any],
) -> None:
    parameter = template["Parameters"]["Architecture"]
    assert parameter["Default"] == "arm64"
    assert sorted(parameter["AllowedValues"]) == ["arm64", "x86_64"]


def test_every_function_runs_on_the_parameters_architecture(template: dict[str, Any]) -> None:
    assert template["Globals"]["Function"]["Architectures"] == [{"Ref": "Architecture"}]
    for function_id in function_ids(template):
        assert "Architectures" not in template["Resources"][function_id]["Properties"]


def test_each_architecture_has_exactly_one_layer_and_functions_use_the_chosen_one(
    template: dict[str, Any],
) -> None:
    layers = _layers(template)
    conditions = template["Conditions"]
    by_arch: dict[str, str] = {}
    for logical_id, layer in layers.items():
        arch = layer["Metadata"]["BuildArchitecture"]
        assert layer["Properties"]["CompatibleArchitectures"] == [arch]
        condition = conditions[layer["Condition"]]
        assert condition == {"Fn::Equals": [{"Ref": "Architecture"}, arch]}
        by_arch[arch] = logical_id
    assert sorted(by_arch) == ["arm64", "x86_64"]
    # Globals pick the arm64 layer when the arm64 condition holds, else the x86_64 one.
    (choice,) = template["Globals"]["Function"]["Layers"]
    condition, when_true, when_false = choice["Fn::If"]
    assert conditions[condition] == {"Fn::Equals": [{"Ref": "Architecture"}, "arm64"]}
    assert when_true == {"Ref": by_arch["arm64"]}
    assert when_false == {"Ref": by_arch["x86_64"]}


def test_the_layer_makefile_builds_each_layer_for_its_wheel_platform(
    template: dict[str, Any],
) -> None:
    makefile = (ROOT / "layers" / "turnkeep" / "Makefile").read_text(encoding="utf-8")
    for logical_id, layer in _layers(template).items():
        assert layer["Metadata"]["BuildMethod"] == "makefile"
        # The package is the ContentUri; the Makefile (ContextPath) builds it from ./turnkeep.
        assert layer["Properties"]["ContentUri"].rstrip("/") == "shared"
        assert (ROOT / "shared" / "turnkeep" / "__init__.py").is_file()
        assert (ROOT / layer["Metadata"]["ContextPath"] / "Makefile").is_file()
        platform = WHEEL_PLATFORM[layer["Metadata"]["BuildArchitecture"]]
        assert re.search(rf"^build-{logical_id}: PLATFORM := {platform}$", makefile, re.M)
        assert re.search(rf"^build-\S+ build-\S+:|^build-{logical_id}:", makefile, re.M)


def test_boto3_and_botocore_are_pinned_together_in_the_layer() -> None:
    text = (ROOT / "layers" / "turnkeep" / "requirements.txt").read_text(encoding="utf-8")
    pins = dict(re.findall(r"^(boto3|botocore)==(\S+)$", text, re.M))
    assert set(pins) == {"boto3", "botocore"}
    # boto3 X.Y.Z is released with botocore 1.(Y).Z ... both share minor and patch numbers.
    assert pins["boto3"].split(".")[1:] == pins["botocore"].split(".")[1:]


def test_every_function_is_built_by_a_makefile_target_of_its_code_folder(
    template: dict[str, Any],
) -> None:
    for function_id in function_ids(template):
        resource = template["Resources"][function_id]
        assert resource["Metadata"]["BuildMethod"] == "makefile", function_id
        makefile = ROOT / resource["Properties"]["CodeUri"] / "Makefile"
        targets = re.search(r"^(build-[^:]*):", makefile.read_text(encoding="utf-8"), re.M)
        assert targets is not None, makefile
        assert f"build-{function_id}" in targets.group(1).split(), (function_id, makefile)
