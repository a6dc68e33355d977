"""Source text shared by the benchmarks' measured subprocesses (not imported there: pasted in).

`LOAD_HANDLER` expects `importlib.util` and `uuid` imported and `path` (the handler file) and
`attribute` (the handler's name) bound; it leaves `module` (the handler file, imported as Lambda
imports it) and `Context` (the parts of the Lambda context Powertools reads).
"""

LOAD_HANDLER = r"""
spec = importlib.util.spec_from_file_location("app", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)

class Context:
    function_name = attribute
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:" + attribute
    aws_request_id = uuid.uuid4().hex
    log_group_name = "/aws/lambda/bench"
    log_stream_name = "bench"
    def get_remaining_time_in_millis(self):
        return 60_000
"""
