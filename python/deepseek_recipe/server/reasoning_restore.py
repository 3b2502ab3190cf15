"""``--restore-reasoning``: put back the reasoning of the server's own earlier turns.

Many clients and gateways drop ``reasoning_content`` (thinking blocks, reasoning items) when they
send a conversation back. The model saw its reasoning when it wrote the turn, so a prompt without
it is not an extension of the earlier one and the prefix cache misses. With this option the server
remembers the reasoning of each turn it generated, keyed by the turn's tool-call IDs and by a digest
of its text, and puts it back into an assistant turn of a later request that lacks it, before the
codec converts the request. Bounded by entry count and reasoning bytes (oldest dropped first).
Only reasoning the server itself generated is ever inserted.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any


def _text_key(text: str) -> str:
    return "text:" + hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


class ReasoningStore:
    """Generated turns' reasoning by tool-call ID and by answer text (thread-safe LRU)."""

    def __init__(self, entries: int, max_bytes: int) -> None:
        self.entries = entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def _put(self, key: str, reasoning: str) -> None:
        if len(reasoning) > self.max_bytes:
            return  # larger than the whole store: not kept (nor does it evict the others)
        old = self._items.pop(key, None)
        if old is not None:
            self.bytes -= len(old)
        self._items[key] = reasoning
        self.bytes += len(reasoning)
        while self._items and (len(self._items) > self.entries or self.bytes > self.max_bytes):
            _, dropped = self._items.popitem(last=False)
            self.bytes -= len(dropped)

    def remember(self, reasoning: str | None, text: str | None, tool_call_ids: list[str]) -> None:
        if not reasoning:
            return
        with self._lock:
            for call_id in tool_call_ids:
                self._put("call:" + call_id, reasoning)
            if text:
                self._put(_text_key(text), reasoning)

    def lookup(self, text: str | None, tool_call_ids: list[str]) -> str | None:
        with self._lock:
            for call_id in tool_call_ids:
                found = self._items.get("call:" + call_id)
                if found is not None:
                    return found
            if text:
                return self._items.get(_text_key(text))
        return None

    # -- what a response holds ---------------------------------------------------------------------
    def remember_response(self, api: str, response: dict[str, Any]) -> None:
        """Record the reasoning of a complete response (the accumulated JSON of any API)."""
        if api == "chat.completions":
            for choice in response.get("choices") or []:
                m = choice.get("message") or {}
                self.remember(m.get("reasoning_content"), m.get("content"),
                              [c.get("id") for c in m.get("tool_calls") or [] if c.get("id")])
        elif api == "messages":
            blocks = response.get("content") or []
            thinking = "".join(b.get("thinking", "") for b in blocks if b.get("type") == "thinking")
            text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            self.remember(thinking, text, [b["id"] for b in blocks if b.get("type") == "tool_use" and b.get("id")])
        elif api == "responses":
            items = response.get("output") or []
            reasoning = "".join(c.get("text", "") for i in items if i.get("type") == "reasoning"
                                for c in i.get("content") or [])
            text = "".join(c.get("text", "") for i in items if i.get("type") == "message"
                           for c in i.get("content") or [] if c.get("type") == "output_text")
            self.remember(reasoning, text, [i["call_id"] for i in items
                                            if i.get("type") == "function_call" and i.get("call_id")])

    # -- what a request lacks ----------------------------------------------------------------------
    def restore(self, api: str, body: dict[str, Any]) -> int:
        """Insert remembered reasoning where an assistant turn lacks it; returns how many turns."""
        if api == "chat.completions":
            return self._restore_chat(body)
        if api in ("messages", "messages.count_tokens"):
            return self._restore_messages(body)
        if api == "responses":
            return self._restore_responses(body)
        return 0

    def _restore_chat(self, body: dict[str, Any]) -> int:
        restored = 0
        for m in body.get("messages") or []:
            if not isinstance(m, dict) or m.get("role") != "assistant" or m.get("reasoning_content"):
                continue
            content = m.get("content")
            text = content if isinstance(content, str) else None
            if isinstance(content, list):
                text = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
            calls = m.get("tool_calls")
            ids = [c["id"] for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)] \
                if isinstance(calls, list) else []
            found = self.lookup(text, ids)
            if found is not None:
                m["reasoning_content"] = found
                restored += 1
        return restored

    def _restore_messages(self, body: dict[str, Any]) -> int:
        restored = 0
        for m in body.get("messages") or []:
            if not isinstance(m, dict) or m.get("role") != "assistant":
                continue
            content = m.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if not isinstance(blocks, list) or any(
                    isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking") for b in blocks):
                continue
            text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
            ids = [b["id"] for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"
                   and isinstance(b.get("id"), str)]
            found = self.lookup(text, ids)
            if found is not None:
                m["content"] = [{"type": "thinking", "thinking": found, "signature": ""}, *blocks]
                restored += 1
        return restored

    def _restore_responses(self, body: dict[str, Any]) -> int:
        items = body.get("input")
        if not isinstance(items, list):
            return 0
        out: list[Any] = []
        restored = 0
        i = 0
        while i < len(items):
            item = items[i]
            # One assistant turn: the output items between two input items (reasoning, messages, calls).
            if isinstance(item, dict) and _is_output_item(item):
                j = i
                while j < len(items) and isinstance(items[j], dict) and _is_output_item(items[j]):
                    j += 1
                turn = items[i:j]
                if not any(t.get("type") == "reasoning" for t in turn):
                    text = "".join(_output_text(t) for t in turn)
                    ids = [t["call_id"] for t in turn if t.get("type") == "function_call"
                           and isinstance(t.get("call_id"), str)]
                    found = self.lookup(text, ids)
                    if found is not None:
                        out.append({"type": "reasoning", "summary": [],
                                    "content": [{"type": "reasoning_text", "text": found}]})
                        restored += 1
                out.extend(turn)
                i = j
                continue
            out.append(item)
            i += 1
        if restored:
            body["input"] = out
        return restored


def _is_output_item(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    return kind in ("reasoning", "function_call") or (item.get("role") == "assistant" and kind in (None, "message"))


def _output_text(item: dict[str, Any]) -> str:
    if item.get("type") == "function_call":
        return ""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content if isinstance(c, dict)
                       and c.get("type") in ("output_text", "text", "input_text"))
    return ""
