"""The structural tag our vLLM tool parser attaches (`integrations/vllm/structured.py`), checked
without vLLM: built from a Chat body the way the parser builds it, then compiled with xgrammar
against the stock vocabulary; a DSML output must be accepted token by token, in auto and
required mode, and text refused where a call is required, as our own grammar does.
"""

import json

import deepseek_recipe as dr
import pytest
from deepseek_recipe.integrations.vllm.codec import Codec
from deepseek_recipe.integrations.vllm.structured import structural_tag_for

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"]}}}]
CALL = ("\n<｜DSML｜ invoke name=\"get_weather\">\n"
        "<｜DSML｜ parameter name=\"city\" string=\"true\">Oslo</｜DSML｜ parameter>\n"
        "<｜DSML｜ parameter name=\"days\" string=\"false\">2</｜DSML｜ parameter>\n"
        "</｜DSML｜ invoke>")


@pytest.fixture(scope="module")
def codec(tokenizer):
    encoding = dr.DeepseekV41Encoding().with_tokenizer(tokenizer)
    return Codec("DeepSeek-V4.1-Flash", dr.ModelVersion.DeepseekV41Flash, tokenizer, encoding)


@pytest.fixture(scope="module")
def xgr_compiler(tokenizer_json_text):
    xgr = pytest.importorskip("xgrammar")
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(tokenizer_json_text))
    info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=129280, stop_token_ids=[1])
    return xgr, xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)


def body(**extra):
    return {"model": "DeepSeek-V4.1-Flash", "messages": [{"role": "user", "content": "weather?"}],
            "thinking": {"type": "disabled"}, "tools": TOOLS} | extra


def accepts(xgr, compiled, ids) -> bool:
    matcher = xgr.GrammarMatcher(compiled)
    return all(matcher.accept_token(t) for t in ids) and matcher.is_terminated()


def test_no_tools_no_tag(codec):
    assert structural_tag_for(codec, body(tools=[])) is None
    assert structural_tag_for(codec, body(tool_choice="none")) is None


def test_tag_uses_control_token_ids(codec):
    tag = json.loads(structural_tag_for(codec, body()))
    text = json.dumps(tag, ensure_ascii=False)
    assert '{"type": "token", "token": 128825}' in text
    assert "｜DSML｜" in text  # only as an excluded spelling of free text
    assert '"｜DSML｜ invoke' not in text


def test_xgrammar_accepts_what_our_grammar_accepts(codec, tokenizer, xgr_compiler):
    xgr, compiler = xgr_compiler
    compiled = compiler.compile_structural_tag(structural_tag_for(codec, body()))
    good = tokenizer.encode("Checking.\n\n<｜DSML｜ calls>" + CALL + "\n</｜DSML｜ calls>") + [1]
    assert accepts(xgr, compiled, good)
    assert accepts(xgr, compiled, tokenizer.encode("No call needed.") + [1])
    required = compiler.compile_structural_tag(structural_tag_for(codec, body(tool_choice="required")))
    body_ids = tokenizer.encode(CALL[1:] + "\n</｜DSML｜ calls>") + [1]
    assert accepts(xgr, required, body_ids)
    assert not accepts(xgr, required, tokenizer.encode("Sure.") + [1])
