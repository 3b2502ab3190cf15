"""Argument type errors of the conversion and streaming API, worded as the official package words them.

The expected type and message of each call were observed by running the same expression with
the official deepseek-recipe 0.2.0 in its side venv (see tests/conformance/official_venv.py).
"""

import deepseek_recipe as dr
import pytest

O = dr.ConversionOptions
P = dr.ParsingOptions
IC = dr.InferenceChunk
conv = dr.Conversation([dr.UserMessage("hi")])


def G():
    """A Responses chunk generator made the official way (from a converted request)."""
    req = dr.ResponsesRequest({"model": "DeepSeek-V4-Pro", "input": "hi"}).convert(dr.ConversionOptions())
    return dr.ResponsesRequest.chunk_generator(req, "i", "m")


def CR():
    body = {"model": "DeepSeek-V4-Pro", "messages": [{"role": "user", "content": "x"}]}
    return dr.ChatCompletionRequest(body).convert(dr.ConversionOptions())


CASES = [
    ('O(default_thinking_mode=5)', 'TypeError', "argument 'default_thinking_mode': 'int' object cannot be cast as 'bool'"),
    ('O(default_thinking_mode=None)', 'TypeError', "argument 'default_thinking_mode': 'NoneType' object cannot be cast as 'bool'"),
    ('O(reasoning_content_behavior=1)', 'TypeError', "argument 'reasoning_content_behavior': 'int' object cannot be cast as 'ReasoningContentBehavior'"),
    ("O(responses_web_search='Drop')", 'TypeError', "argument 'responses_web_search': 'str' object cannot be cast as 'WebSearchBehavior'"),
    ('O(messages_web_search=None)', 'TypeError', "argument 'messages_web_search': 'NoneType' object cannot be cast as 'WebSearchBehavior'"),
    ("O(thinking_max_tokens_upper_bound='x')", 'TypeError', "argument 'thinking_max_tokens_upper_bound': 'str' object cannot be interpreted as an integer"),
    ('O(non_thinking_max_tokens_upper_bound=-1)', 'OverflowError', 'out of range integral type conversion attempted'),
    ('O().with_default_thinking_mode(1)', 'TypeError', "argument 'default_thinking_mode': 'int' object cannot be cast as 'bool'"),
    ("O().with_reasoning_content_behavior('x')", 'TypeError', "argument 'reasoning_content_behavior': 'str' object cannot be cast as 'ReasoningContentBehavior'"),
    ('O().with_responses_web_search(1)', 'TypeError', "argument 'responses_web_search': 'int' object cannot be cast as 'WebSearchBehavior'"),
    ('O().with_messages_web_search(1)', 'TypeError', "argument 'messages_web_search': 'int' object cannot be cast as 'WebSearchBehavior'"),
    ('O().with_special_tokens({})', 'TypeError', "argument 'special_tokens': 'dict' object cannot be cast as 'SpecialTokens'"),
    ('O().with_model_alias(5, dr.ModelVersion.DeepseekV4Pro)', 'TypeError', "argument 'model': 'int' object cannot be cast as 'str'"),
    ('O().with_model_versions_by_name({1: dr.ModelVersion.DeepseekV4Pro})', 'TypeError', "argument 'model_versions_by_name': 'int' object cannot be cast as 'str'"),
    ("O().with_model_alias('m', dr.ModelVersion.DeepseekV41Flash)", None, None),
    ("O().with_model_alias('m', 'V4')", 'TypeError', "argument 'model_version': 'str' object cannot be cast as 'ModelVersion'"),
    ("O().with_model_versions_by_name({'a': 1})", 'TypeError', "argument 'model_versions_by_name': 'int' object cannot be cast as 'ModelVersion'"),
    ('O().with_model_versions_by_name([1])', 'TypeError', "argument 'model_versions_by_name': 'list' object cannot be cast as 'dict'"),
    ("O().with_thinking_max_tokens_upper_bound('x')", 'TypeError', "argument 'thinking_max_tokens_upper_bound': 'str' object cannot be interpreted as an integer"),
    ('O().with_non_thinking_max_tokens_upper_bound(None)', 'TypeError', "argument 'non_thinking_max_tokens_upper_bound': 'NoneType' object cannot be interpreted as an integer"),
    ("dr.ChatCompletionRequest({'model':'x','messages':[]}).convert(5)", 'TypeError', "argument 'options': 'int' object cannot be cast as 'ConversionOptions'"),
    ("dr.ResponsesRequest({'model':'x','input':'hi'}).convert('o')", 'TypeError', "argument 'options': 'str' object cannot be cast as 'ConversionOptions'"),
    ("dr.MessagesRequest({'model':'x','messages':[], 'max_tokens': 5}).convert(None)", 'TypeError', "argument 'options': 'NoneType' object cannot be cast as 'ConversionOptions'"),
    ("dr.ResponsesRequest({'model':'x','input':'hi'}).namespace_tool_map(1)", 'TypeError', "argument 'options': 'int' object cannot be cast as 'ConversionOptions'"),
    ('P(parse_tool_calls=1)', 'TypeError', "argument 'parse_tool_calls': 'int' object cannot be cast as 'bool'"),
    ('P(starts_in_tool_calls=None)', 'TypeError', "argument 'starts_in_tool_calls': 'NoneType' object cannot be cast as 'bool'"),
    ("P(parse_json_output='x')", 'TypeError', "argument 'parse_json_output': 'str' object cannot be cast as 'bool'"),
    ('P(thinking_initial_stage=1)', 'TypeError', "argument 'thinking_initial_stage': 'int' object cannot be cast as 'ThinkingInitialStage'"),
    ("P(stop_sequences='ab')", 'TypeError', "argument 'stop_sequences': Can't extract `str` to `Vec`"),
    ('P(stop_sequences=[1])', 'TypeError', "argument 'stop_sequences': 'int' object cannot be cast as 'str'"),
    ('P(stop_sequences=5)', 'TypeError', "argument 'stop_sequences': 'int' object cannot be cast as 'Sequence'"),
    ('P(special_tokens={})', 'TypeError', "argument 'special_tokens': 'dict' object cannot be cast as 'SpecialTokens'"),
    ("P(stop_sequences=['a'], special_tokens=dr.SpecialTokens())", None, None),
    ('IC.text(5)', 'TypeError', "argument 'content': 'int' object cannot be cast as 'str'"),
    ("IC.text('a', 'b')", 'TypeError', "argument 'token_count': 'str' object cannot be interpreted as an integer"),
    ("IC.tokens('ab')", 'TypeError', "argument 'token_ids': Can't extract `str` to `Vec`"),
    ("IC.finish('Stop')", 'TypeError', "argument 'finish_reason': 'str' object cannot be cast as 'InferenceFinishReason'"),
    ('IC.finish(None)', 'TypeError', "argument 'finish_reason': 'NoneType' object cannot be cast as 'InferenceFinishReason'"),
    ('IC.ready(prompt_usage=5)', 'TypeError', "argument 'prompt_usage': 'int' object cannot be cast as 'PromptUsage'"),
    ('IC.ready(system_fingerprint=5)', 'TypeError', "argument 'system_fingerprint': 'int' object cannot be cast as 'str'"),
    ("dr.PromptUsage(prompt_tokens='x')", 'TypeError', "argument 'prompt_tokens': 'str' object cannot be interpreted as an integer"),
    ("dr.MessagesChunkGenerator(5, 'm', True)", 'TypeError', "argument 'id': 'int' object cannot be cast as 'str'"),
    ("dr.MessagesChunkGenerator('i', 'm', 1)", 'TypeError', "argument 'thinking_mode': 'int' object cannot be cast as 'bool'"),
    ("dr.MessagesChunkGenerator('i', 'm', True).with_signature(5)", 'TypeError', "argument 'signature': 'int' object cannot be cast as 'str'"),
    ('dr.StreamProcessor(5, P())', 'TypeError', 'expected a protocol chunk generator'),
    ("dr.StreamProcessor(dr.MessagesChunkGenerator('i', 'm', True), 5)", 'TypeError', "argument 'options': 'int' object cannot be cast as 'ParsingOptions'"),
    ("dr.StreamProcessor(dr.MessagesChunkGenerator('i', 'm', True), P(), 5)", 'TypeError', "argument 'tokenizer': 'int' object cannot be cast as 'Tokenizer'"),
    ("dr.StreamProcessor(dr.MessagesChunkGenerator('i', 'm', True), P()).push(5)", 'TypeError', "argument 'chunk': 'int' object cannot be cast as 'InferenceChunk'"),
    ("dr.StreamProcessor(dr.MessagesChunkGenerator('i', 'm', True), P()).push('x')", 'TypeError', "argument 'chunk': 'str' object cannot be cast as 'InferenceChunk'"),
    ("dr.ChatCompletionResponse('i', 'm', 0, 0, 0).accumulate(5)", 'TypeError', "argument 'chunk': 'int' object cannot be cast as 'ChatCompletionChunk'"),
    ("dr.ChatCompletionResponse(5, 'm', 0, 0, 0)", 'TypeError', "argument 'id': 'int' object cannot be cast as 'str'"),
    ("dr.ResponsesResponse('i', 'm', 0, 0, 0).accumulate(5)", 'TypeError', "argument 'chunk': 'int' object cannot be cast as 'ResponsesStreamEvent'"),
    ("dr.MessagesResponse('i', 'm', 0, 0, 0).accumulate(None)", 'TypeError', "argument 'chunk': 'NoneType' object cannot be cast as 'MessagesStreamEvent'"),
    ('dr.ChatCompletionResponse.sse_event_name(5)', 'TypeError', "argument 'chunk': 'int' object cannot be cast as 'ChatCompletionChunk'"),
    ('dr.ResponsesResponse.sse_event_name(5)', 'TypeError', "argument 'chunk': 'int' object cannot be cast as 'ResponsesStreamEvent'"),
    ('dr.ConversationRequest(5, dr.ModelVersion.DeepseekV4Pro)', 'TypeError', "argument 'conversation': 'int' object cannot be cast as 'Conversation'"),
    ("dr.ConversationRequest(conv, 'x')", 'TypeError', "argument 'model_version': 'str' object cannot be cast as 'ModelVersion'"),
    ('G().with_echo(5)', 'TypeError', "argument 'echo': 'int' object cannot be cast as 'ResponsesEcho'"),
    ('G().with_namespace_tool_map(5)', 'TypeError', "argument 'namespace_tool_map': 'int' object cannot be cast as 'dict'"),
    ("G().with_namespace_tool_map({'a': 5})", 'TypeError', "argument 'namespace_tool_map': 'int' object cannot be cast as 'tuple'"),
    ("G().with_namespace_tool_map({'a': ('x', 5)})", 'TypeError', "argument 'namespace_tool_map': 'int' object cannot be cast as 'str'"),
    ("dr.ResponsesRequest.chunk_generator(5, 'i', 'm')", 'TypeError', "argument 'request': 'int' object cannot be cast as 'ConversationRequest'"),
    ("dr.ChatCompletionRequest.chunk_generator(CR(), 5, 'm')", 'TypeError', "argument 'id': 'int' object cannot be cast as 'str'"),
    ("dr.ChatCompletionRequest.chunk_generator(CR(), 'i', None)", 'TypeError', "argument 'model': 'NoneType' object cannot be cast as 'str'"),
    ("dr.MessagesRequest.chunk_generator(CR(), 'i', 'm')", None, None),
    ("dr.ChatCompletionRequest.chunk_generator(CR(), 'i', 'm', 5)", 'TypeError', 'ChatCompletionRequest.chunk_generator() takes 3 positional arguments but 4 were given'),
    ("G().with_namespace_tool_map({'a': ('x','y','z')})", 'ValueError', 'expected tuple of length 2, but got tuple of length 3'),
    ("G().with_namespace_tool_map({'a': ('x',)})", 'ValueError', 'expected tuple of length 2, but got tuple of length 1'),
    ("G().with_namespace_tool_map({'a': ['x','y']})", 'TypeError', "argument 'namespace_tool_map': 'list' object cannot be cast as 'tuple'"),
    ("G().with_namespace_tool_map({1: ('x','y')})", 'TypeError', "argument 'namespace_tool_map': 'int' object cannot be cast as 'str'"),
    ("G().with_namespace_tool_map({'a': ('x','y')})", None, None),
]


@pytest.mark.parametrize("expr,error_type,message", CASES)
def test_argument_errors_match_official(expr, error_type, message):
    if error_type is None:
        eval(expr)
        return
    with pytest.raises(Exception) as info:
        eval(expr)
    assert type(info.value).__name__ == error_type
    assert str(info.value) == message
