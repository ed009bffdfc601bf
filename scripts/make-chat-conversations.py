#!/usr/bin/env python3
"""Writes tests/fixtures/chat/conversations.json: the conversations every chat template is
rendered over (by jinja2 through transformers' render_jinja_template, the oracle, and by
webdelegate's ChatTemplate). Our own data, deterministic: system or not, one to five turns,
tool definitions and tool calls (arguments as a dict and as a JSON string), tool results, list
content, unicode, empty content, with and without add_generation_prompt, extra variables."""
import json
import pathlib

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Adds two numbers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
    },
]

SYSTEMS = ["You are a helpful assistant.", "Réponds en français. 日本語も話せます。", ""]
USERS = [
    "Hello!",
    "What is the capital of France?",
    "Write a haiku about the sea.\nKeep it short.",
    "Explain  double  spaces and\ttabs.",
    "Ünïcödé ✓ — emoji 😀 and 中文",
    "",
    "<b>markup</b> & \"quotes\" 'single' {braces} {{jinja}} {% tag %}",
    "   leading and trailing spaces   ",
]
ASSISTANTS = [
    "Hi! How can I help?",
    "The capital of France is Paris.",
    "Waves fold on the shore,\nsalt wind whispers to the gulls,\nthe tide keeps its time.",
    "Sure: 1) first, 2) second.",
    "",
]


def alternating(turns, first_user=0, system=None, gen=True):
    messages = []
    if system is not None:
        messages.append({"role": "system", "content": system})
    for t in range(turns):
        messages.append({"role": "user", "content": USERS[(first_user + t) % len(USERS)]})
        if t + 1 < turns:
            messages.append({"role": "assistant", "content": ASSISTANTS[(first_user + t) % len(ASSISTANTS)]})
    return {"messages": messages, "add_generation_prompt": gen}


def main():
    cases = []
    for turns in range(1, 6):
        for first in (0, 3):
            cases.append(alternating(turns, first))
    for s in SYSTEMS:
        for turns in (1, 3):
            cases.append(alternating(turns, 1, system=s))
    cases.append(alternating(2, 4, gen=False))
    cases.append(alternating(1, 6, system=SYSTEMS[0], gen=False))
    # A conversation that ends with the assistant's reply (as a follow-up turn renders it).
    c = alternating(2, 0)
    c["messages"].append({"role": "assistant", "content": ASSISTANTS[1]})
    c["add_generation_prompt"] = False
    cases.append(c)
    # List content (text parts).
    cases.append({"messages": [
        {"role": "user", "content": [{"type": "text", "text": "Describe this."}, {"type": "text", "text": "Briefly."}]},
    ], "add_generation_prompt": True})
    cases.append({"messages": [
        {"role": "system", "content": [{"type": "text", "text": "Be terse."}]},
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]},
        {"role": "user", "content": [{"type": "text", "text": "Bye"}]},
    ], "add_generation_prompt": True})
    # Tools offered, no call yet.
    cases.append({"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS, "add_generation_prompt": True})
    cases.append({"messages": [
        {"role": "system", "content": SYSTEMS[0]},
        {"role": "user", "content": "What is 2 + 3?"},
    ], "tools": TOOLS, "add_generation_prompt": True})
    # A tool call (arguments as a dict, transformers' convention) and its result.
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}},
    ]}
    result = {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temperature\": 21, \"sky\": \"clear\"}"}
    cases.append({"messages": [{"role": "user", "content": "Weather in Paris?"}, call, result], "tools": TOOLS, "add_generation_prompt": True})
    cases.append({"messages": [
        {"role": "system", "content": SYSTEMS[0]},
        {"role": "user", "content": "Weather in Paris?"}, call, result,
        {"role": "assistant", "content": "It is 21 °C and clear in Paris."},
        {"role": "user", "content": "Thanks!"},
    ], "tools": TOOLS, "add_generation_prompt": True})
    # Two calls in one turn, arguments as a JSON string (OpenAI's convention).
    cases.append({"messages": [
        {"role": "user", "content": "Add 1 and 2, and 3 and 4."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 1, \"b\": 2}"}},
            {"id": "call_b", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 3, \"b\": 4}"}},
        ]},
        {"role": "tool", "tool_call_id": "call_a", "name": "add", "content": "3"},
        {"role": "tool", "tool_call_id": "call_b", "name": "add", "content": "7"},
    ], "tools": TOOLS, "add_generation_prompt": True})
    # Extra variables some templates read.
    cases.append({**alternating(1, 1), "extra": {"enable_thinking": False}})
    cases.append({**alternating(2, 2, system=SYSTEMS[0]), "extra": {"enable_thinking": True}})
    # Roles some templates refuse: two users in a row, a conversation starting with the assistant.
    cases.append({"messages": [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}], "add_generation_prompt": True})
    cases.append({"messages": [{"role": "assistant", "content": "I start."}, {"role": "user", "content": "ok"}], "add_generation_prompt": True})
    cases.append({"messages": [], "add_generation_prompt": True})
    for i, c in enumerate(cases):
        c["id"] = i
    out = pathlib.Path(__file__).resolve().parent.parent / "tests/fixtures/chat/conversations.json"
    out.write_text(json.dumps(cases, ensure_ascii=False, indent=1) + "\n")
    print(f"{out}: {len(cases)} conversations")


if __name__ == "__main__":
    main()
