"""Read template.yaml: create its DynamoDB table and S3 bucket exactly as declared, and list
its functions, their declared environment and the state machine's wiring.

The template is the single source of the key schema, indexes and TTL, so code, tests and the
SAM local stack cannot drift from what is deployed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"


class _CfnLoader(yaml.SafeLoader):
    """A YAML loader that keeps CloudFormation short-form tags (!Ref, !Sub, ...) as plain data."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {f"Fn::{suffix}" if suffix != "Ref" else "Ref": value}


_CfnLoader.add_multi_constructor("!", _tag)


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """The parsed template (intrinsic functions as dicts)."""
    with path.open(encoding="utf-8") as fh:
        data: dict[str, Any] = yaml.load(fh, Loader=_CfnLoader)
    return data


def _resource(kind: str, template: dict[str, Any]) -> dict[str, Any]:
    found = [r for r in template["Resources"].values() if r["Type"] == kind]
    if len(found) != 1:
        raise AssertionError(f"template.yaml must declare exactly one {kind}, found {len(found)}")
    props: dict[str, Any] = found[0]["Properties"]
    return props


def table_definition(template: dict[str, Any] | None = None) -> dict[str, Any]:
    """The AWS::DynamoDB::Table properties of the template."""
    return _resource("AWS::DynamoDB::Table", template or load_template())


def create_table(client: Any, name: str, template: dict[str, Any] | None = None) -> None:
    """Create `name` with the template's key schema, indexes, billing mode and TTL."""
    props = table_definition(template)
    kwargs: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": props["AttributeDefinitions"],
        "KeySchema": props["KeySchema"],
        "BillingMode": props.get("BillingMode", "PAY_PER_REQUEST"),
    }
    if props.get("GlobalSecondaryIndexes"):
        kwargs["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"]
    client.create_table(**kwargs)
    client.get_waiter("table_exists").wait(TableName=name)
    ttl = props.get("TimeToLiveSpecification")
    if ttl:
        client.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)


def _lifecycle_filter(
    rule: dict[str, Any], template: dict[str, Any] | None, parameters: dict[str, str] | None
) -> dict[str, Any]:
    """S3's `Filter` of a template lifecycle rule: its `Prefix` (resolved) and `TagFilters`."""
    source = template or load_template()
    refs = {
        key: str((parameters or {}).get(key, spec.get("Default", "")))
        for key, spec in source.get("Parameters", {}).items()
    }
    prefix = str(resolve(rule.get("Prefix", ""), refs))
    tags = [{"Key": t["Key"], "Value": t["Value"]} for t in rule.get("TagFilters", [])]
    if not tags:
        return {"Prefix": prefix}
    if len(tags) == 1 and not prefix:
        return {"Tag": tags[0]}
    return {"And": {"Prefix": prefix, "Tags": tags}}


_CORS_KEYS = {
    "Id": "ID",
    "AllowedMethods": "AllowedMethods",
    "AllowedOrigins": "AllowedOrigins",
    "AllowedHeaders": "AllowedHeaders",
    "ExposedHeaders": "ExposeHeaders",
    "MaxAge": "MaxAgeSeconds",
}


def bucket_cors_rules(
    template: dict[str, Any] | None = None, parameters: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """The bucket's CORS rules as S3's PutBucketCors takes them, for `parameters` (others at
    their Default); `Fn::Split` of a parameter `Ref` is resolved, [] when there is no rule."""
    source = template or load_template()
    values = {
        key: str((parameters or {}).get(key, spec.get("Default", "")))
        for key, spec in source.get("Parameters", {}).items()
    }

    def resolved(value: Any) -> Any:
        if isinstance(value, dict) and set(value) == {"Fn::Split"}:
            separator, ref = value["Fn::Split"]
            return values[ref["Ref"]].split(separator)
        return value

    props = _resource("AWS::S3::Bucket", render(source, parameters))
    return [
        {_CORS_KEYS[key]: resolved(value) for key, value in rule.items()}
        for rule in props.get("CorsConfiguration", {}).get("CorsRules", [])
    ]


def create_bucket(
    client: Any,
    name: str,
    template: dict[str, Any] | None = None,
    parameters: dict[str, str] | None = None,
) -> None:
    """Create `name` with the template's encryption, public-access block, lifecycle and CORS
    rules (for `parameters`, others at their Default)."""
    props = _resource("AWS::S3::Bucket", template or load_template())
    client.create_bucket(Bucket=name)
    cors = bucket_cors_rules(template, parameters)
    if cors:
        client.put_bucket_cors(Bucket=name, CORSConfiguration={"CORSRules": cors})
    if "BucketEncryption" in props:
        client.put_bucket_encryption(
            Bucket=name,
            ServerSideEncryptionConfiguration={
                "Rules": [
                    {"ApplyServerSideEncryptionByDefault": r["ServerSideEncryptionByDefault"]}
                    for r in props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
                ]
            },
        )
    if "PublicAccessBlockConfiguration" in props:
        client.put_public_access_block(
            Bucket=name, PublicAccessBlockConfiguration=props["PublicAccessBlockConfiguration"]
        )
    rules = props.get("LifecycleConfiguration", {}).get("Rules")
    if rules:
        converted = []
        for rule in rules:
            item: dict[str, Any] = {
                "ID": rule["Id"],
                "Status": rule["Status"],
                "Filter": _lifecycle_filter(rule, template, parameters),
            }
            if "AbortIncompleteMultipartUpload" in rule:
                item["AbortIncompleteMultipartUpload"] = rule["AbortIncompleteMultipartUpload"]
            if "ExpirationInDays" in rule:
                item["Expiration"] = {"Days": rule["ExpirationInDays"]}
            converted.append(item)
        client.put_bucket_lifecycle_configuration(
            Bucket=name, LifecycleConfiguration={"Rules": converted}
        )


FUNCTION = "AWS::Serverless::Function"
STATE_MACHINE = "AWS::Serverless::StateMachine"


def render(template: dict[str, Any], parameters: dict[str, str] | None = None) -> dict[str, Any]:
    """`template` as CloudFormation deploys it for `parameters` (others at their Default):
    resources whose Condition is false dropped, every `Fn::If` replaced by its chosen branch
    (`Ref AWS::NoValue` removes the key). Conditions may use `Fn::Equals` of a parameter `Ref`
    and a literal, `Fn::Not`, `Fn::And`, `Fn::Or`; anything else raises ValueError.
    Idempotent."""
    values = {
        name: str((parameters or {}).get(name, spec.get("Default", "")))
        for name, spec in template.get("Parameters", {}).items()
    }
    conditions = template.get("Conditions", {})

    def truth(expr: Any) -> bool:
        if isinstance(expr, dict) and set(expr) == {"Fn::Equals"}:
            left, right = (
                values[v["Ref"]] if isinstance(v, dict) and set(v) == {"Ref"} else str(v)
                for v in expr["Fn::Equals"]
            )
            return left == right
        if isinstance(expr, dict) and set(expr) == {"Fn::Not"}:
            return not truth(expr["Fn::Not"][0])
        if isinstance(expr, dict) and set(expr) == {"Fn::And"}:
            return all(truth(e) for e in expr["Fn::And"])
        if isinstance(expr, dict) and set(expr) == {"Fn::Or"}:
            return any(truth(e) for e in expr["Fn::Or"])
        if isinstance(expr, dict) and set(expr) == {"Condition"}:
            return truth(conditions[expr["Condition"]])
        raise ValueError(f"unsupported condition: {expr!r}")

    no_value = object()

    def walk(value: Any) -> Any:
        if isinstance(value, dict) and set(value) == {"Fn::If"}:
            name, if_true, if_false = value["Fn::If"]
            return walk(if_true if truth(conditions[name]) else if_false)
        if isinstance(value, dict) and value == {"Ref": "AWS::NoValue"}:
            return no_value
        if isinstance(value, dict):
            out = {k: walk(v) for k, v in value.items()}
            return {k: v for k, v in out.items() if v is not no_value}
        if isinstance(value, list):
            return [v for v in (walk(item) for item in value) if v is not no_value]
        return value

    rendered = dict(template)
    rendered["Resources"] = {
        logical_id: walk({k: v for k, v in resource.items() if k != "Condition"})
        for logical_id, resource in template["Resources"].items()
        if "Condition" not in resource or truth(conditions[resource["Condition"]])
    }
    if "Globals" in template:
        rendered["Globals"] = walk(template["Globals"])
    if "Outputs" in template:
        rendered["Outputs"] = {
            name: walk({k: v for k, v in output.items() if k != "Condition"})
            for name, output in template["Outputs"].items()
            if "Condition" not in output or truth(conditions[output["Condition"]])
        }
    return rendered


def function_ids(template: dict[str, Any]) -> list[str]:
    """Logical ids of every Lambda function of the template, in template order."""
    return [k for k, r in template["Resources"].items() if r["Type"] == FUNCTION]


def declared_environment(template: dict[str, Any], function_id: str) -> dict[str, Any]:
    """The environment variables the template declares for `function_id` (Globals first, the
    function's own on top), values as written (intrinsics as dicts). `sam local` passes a
    function only these names, whatever `--env-vars` holds."""
    globals_env = template.get("Globals", {}).get("Function", {}).get("Environment", {})
    own = template["Resources"][function_id]["Properties"].get("Environment", {})
    return {**globals_env.get("Variables", {}), **own.get("Variables", {})}


def state_machine_wiring(template: dict[str, Any]) -> dict[str, str]:
    """DefinitionSubstitutions of the one state machine the template deploys (for its
    parameters' defaults unless `template` is already rendered): placeholder -> function
    logical id."""
    machines = [r for r in render(template)["Resources"].values() if r["Type"] == STATE_MACHINE]
    if len(machines) != 1:
        raise AssertionError(f"template.yaml must declare one state machine, found {len(machines)}")
    props = machines[0]["Properties"]
    return {
        name: ref["Fn::GetAtt"].split(".")[0]
        for name, ref in props["DefinitionSubstitutions"].items()
    }


def state_machine_definition(template: dict[str, Any]) -> str:
    """The ASL text of the template's state machine (its DefinitionUri file; parameters at
    their defaults unless `template` is already rendered)."""
    machine = next(r for r in render(template)["Resources"].values() if r["Type"] == STATE_MACHINE)
    uri: str = machine["Properties"]["DefinitionUri"]
    return (ROOT / uri).read_text(encoding="utf-8")


def resolve(value: Any, refs: dict[str, str]) -> Any:
    """`value` with `Ref` and `Fn::Sub` (string form) resolved from `refs` (logical id or
    parameter name -> value); raises KeyError for a name `refs` lacks."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return refs[value["Ref"]]
    if isinstance(value, dict) and set(value) == {"Fn::Sub"} and isinstance(value["Fn::Sub"], str):
        return re.sub(r"\$\{([^}]+)\}", lambda m: refs[m.group(1)], value["Fn::Sub"])
    if isinstance(value, dict | list):
        raise ValueError(f"unsupported intrinsic in an environment value: {value!r}")
    return value


def deployed_environment(
    template: dict[str, Any], function_id: str, refs: dict[str, str]
) -> dict[str, str]:
    """The environment a deployment gives `function_id` (declared variables, resolved; the
    template rendered for the parameter values among `refs`)."""
    rendered = render(template, refs)
    return {
        name: str(resolve(value, refs))
        for name, value in declared_environment(rendered, function_id).items()
    }
