"""Create the DynamoDB table and S3 bucket exactly as template.yaml declares them (the helpers
live with the SAM local tooling, which creates the same resources in a moto container)."""

from tools.sam_local.template import (
    TEMPLATE,
    bucket_cors_rules,
    create_bucket,
    create_table,
    load_template,
    table_definition,
)

__all__ = [
    "TEMPLATE",
    "bucket_cors_rules",
    "create_bucket",
    "create_table",
    "load_template",
    "table_definition",
]
