"""A Responses generator made from a converted Responses request reports that request's
settings, as the official package does (expected object recorded from deepseek-recipe 0.2.0)."""

from __future__ import annotations

import json

import deepseek_recipe as d

BODY = {
    "model": "DeepSeek-V4.1-Flash", "input": "hi", "instructions": "be nice",
    "reasoning": {"effort": "low"}, "temperature": 0.5, "top_p": 0.9, "max_output_tokens": 100,
    "user": "u1", "text": {"format": {"type": "text"}},
    "tools": [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}],
    "tool_choice": "auto", "top_logprobs": 3,
}

# Recorded from the official package (created_at / completed_at are wall-clock and dropped).
EXPECTED = json.loads("""{"background": false, "content_filters": null, "error": null,
 "frequency_penalty": 0.0, "id": "rid", "incomplete_details": null, "instructions": "be nice",
 "max_output_tokens": 100, "max_tool_calls": null, "metadata": {}, "model": "m", "moderation": null,
 "object": "response", "output": [{"content": [{"text": "x", "type": "reasoning_text"}],
 "encrypted_content": "rid-0", "id": "rs_rid_0", "status": "completed", "summary": [], "type": "reasoning"},
 {"content": [{"annotations": [], "logprobs": [], "text": "y", "type": "output_text"}], "id": "msg_rid_1",
 "phase": "final_answer", "role": "assistant", "status": "completed", "type": "message"}],
 "parallel_tool_calls": true, "presence_penalty": 0.0, "previous_response_id": null,
 "prompt_cache_key": null, "prompt_cache_retention": null, "reasoning": {"effort": "low", "summary": null},
 "safety_identifier": null, "service_tier": "default", "status": "completed", "store": false,
 "temperature": 0.5, "text": {"format": {"type": "text"}, "verbosity": null}, "tool_choice": "auto",
 "tools": [{"description": null, "name": "f", "parameters": {"properties": {}, "type": "object"},
 "strict": null, "type": "function"}], "top_logprobs": 3, "top_p": 0.9, "truncation": "disabled",
 "usage": {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 2,
 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2}, "user": "u1"}""")


def test_converted_responses_request_echoes_its_settings():
    converted = d.ResponsesRequest(BODY).convert(d.ConversionOptions())
    generator = d.ResponsesRequest.chunk_generator(converted, "rid", "m")
    processor = d.StreamProcessor(generator, converted.parsing_options)
    events = processor.push(d.InferenceChunk.text("x</think>y", 2)) + processor.finish()
    response = json.loads(events[-1].to_json())["response"]
    for wall_clock in ("created_at", "completed_at"):
        response.pop(wall_clock)
    assert response == EXPECTED


def _reported_tools(tools):
    converted = d.ResponsesRequest({"model": "DeepSeek-V4.1-Flash", "input": "hi", "tools": tools}).convert(
        d.ConversionOptions())
    processor = d.StreamProcessor(d.ResponsesRequest.chunk_generator(converted, "rid", "m"), converted.parsing_options)
    events = processor.push(d.InferenceChunk.text("x</think>y", 2)) + processor.finish()
    text = events[-1].to_json()
    return text[text.index('"tools"'):text.index(',"top_logprobs"')]


def test_reported_tools_have_the_official_shapes():
    # Each expected string was printed by the official package for the same tools.
    assert _reported_tools([
        {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}},
        {"type": "function", "name": "g", "description": "dd", "strict": False, "defer_loading": True,
         "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}},
        {"type": "web_search"},
        {"type": "namespace", "name": "ns", "description": "nd",
         "tools": [{"type": "function", "name": "h", "parameters": {"type": "object", "properties": {}}}]},
        {"type": "custom", "name": "apply_patch"},
    ]) == ('"tools":[{"type":"function","name":"f","description":null,"parameters":{"type":"object",'
           '"properties":{}},"strict":null},{"type":"function","name":"g","description":"dd","parameters":'
           '{"type":"object","properties":{"a":{"type":"string"}}},"strict":false},{"type":"web_search",'
           '"search_context_size":null,"user_location":null},{"type":"namespace","name":"ns","description":'
           '"nd","tools":[{"type":"function","name":"h","description":null,"parameters":{"type":"object",'
           '"properties":{}},"strict":null}]},{"type":"custom","name":"apply_patch"}]')
    assert _reported_tools([{"type": "web_search", "search_context_size": "low",
                             "user_location": {"type": "approximate", "city": "X"}}]) == (
        '"tools":[{"type":"web_search","search_context_size":"low","user_location":{"city":"X",'
        '"country":null,"region":null,"timezone":null}}]')
    assert _reported_tools([{"type": "web_search_preview"}]) == '"tools":[]'
    assert _reported_tools([{"type": "custom", "name": "apply_patch", "description": "dd",
                             "format": {"type": "text"}}]) == '"tools":[{"type":"custom","name":"apply_patch"}]'
