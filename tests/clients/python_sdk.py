"""Drives `ctxgate serve` with the official MCP Python SDK (the `mcp` package from PyPI).

Run by tests/client_python_sdk.rs as `python python_sdk.py CTXGATE DB LOG`. The SDK validates
every successful result against the tool's output schema (with `jsonschema`); this script also
checks each schema against the JSON Schema 2020-12 meta-schema with format checking, and that
tool errors reach the caller as errors with their kind. Prints one JSON line of findings; exits
non-zero on the first failure.
"""

import asyncio
import json
import sys

import jsonschema
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def check_schema(name: str, schema: dict) -> None:
    validator = jsonschema.Draft202012Validator
    validator.check_schema(schema)
    # An unknown format is what strict validators (Ajv, in the MCP Inspector) refuse.
    known = validator.FORMAT_CHECKER.checkers
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            fmt = node.get("format")
            if isinstance(fmt, str) and fmt not in known:
                raise AssertionError(f"{name}: format {fmt!r} is not a JSON Schema format")
            if isinstance(node.get("type"), list):
                raise AssertionError(f"{name}: a list of types {node['type']}")
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def error_document(result) -> dict:
    assert result.is_error, f"expected a tool error, got {result}"
    assert result.structured_content is None, "an error result must not carry structured content"
    text = result.content[0].text
    document = json.loads(text)
    assert document["error"]["message"], text
    return document["error"]


async def main(binary: str, db: str, log: str) -> dict:
    params = StdioServerParameters(command=binary, args=["--db", db, "serve", "-q"])
    findings = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            findings["tools"] = sorted(t.name for t in tools)
            for tool in tools:
                check_schema(tool.name, tool.input_schema)
                assert tool.output_schema is not None, f"{tool.name} declares no output schema"
                check_schema(tool.name, tool.output_schema)

            # The first reply on a new index, and a bad argument: errors the model must see.
            first = await session.call_tool("select_context", {"session": "work", "query": "redis lock"})
            findings["new_index"] = error_document(first)["kind"]
            bad = await session.call_tool("select_context", {"session": "work"})
            findings["bad_input"] = error_document(bad)["kind"]

            # Every tool once; the SDK raises if a result does not match its output schema.
            calls = [
                ("record_turn", {"session": "work", "user": "How long should the Redis lock TTL be?",
                                 "assistant": "Set PX 30000 and renew it every 10 seconds."}),
                ("select_context", {"session": "work", "query": "redis lock ttl", "policy": "fill",
                                    "budget": 500}),
                ("build_prompt", {"session": "work", "query": "redis lock ttl"}),
                ("search_history", {"query": "redis lock", "limit": 3}),
                ("gate", {"session": "work", "query": "and the renewal?"}),
                ("list_sessions", {}),
                ("import_logs", {"paths": [log]}),
                ("store_evidence", {"ref": "logs/build.txt", "content": "error: linking failed\n"}),
                ("read_evidence", {"ref": "logs/build.txt", "max_bytes": 5}),
            ]
            results = {}
            for name, arguments in calls:
                result = await session.call_tool(name, arguments)
                assert not result.is_error, f"{name}: {result.content}"
                results[name] = result.structured_content
            findings["selected_turns"] = [b["turn_id"] for b in results["select_context"]["blocks"]]
            findings["imported_turns"] = results["import_logs"]["new_turns"]
            findings["read"] = results["read_evidence"]["content"]
            findings["sessions"] = sorted(s["name"] for s in results["list_sessions"]["sessions"])
            # The first reply of a new session in an index that has others.
            other = await session.call_tool("select_context", {"session": "other", "query": "redis lock"})
            findings["new_session"] = error_document(other)["kind"]
    return findings


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:4]))))
