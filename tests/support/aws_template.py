"""Create the DynamoDB table and S3 bucket exactly as template.yaml declares them.

The template is the single source of the key schema, indexes and TTL, so code and tests
cannot drift from what is deployed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


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


def create_bucket(client: Any, name: str, template: dict[str, Any] | None = None) -> None:
    """Create `name` with the template's encryption, public-access block and lifecycle."""
    props = _resource("AWS::S3::Bucket", template or load_template())
    client.create_bucket(Bucket=name)
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
                "Filter": {"Prefix": ""},
            }
            if "AbortIncompleteMultipartUpload" in rule:
                item["AbortIncompleteMultipartUpload"] = rule["AbortIncompleteMultipartUpload"]
            if "ExpirationInDays" in rule:
                item["Expiration"] = {"Days": rule["ExpirationInDays"]}
            converted.append(item)
        client.put_bucket_lifecycle_configuration(
            Bucket=name, LifecycleConfiguration={"Rules": converted}
        )
