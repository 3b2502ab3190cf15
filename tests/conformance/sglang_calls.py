"""The `deepseek_recipe` calls SGLang 0.5.23 makes, replayed on neutral JSON cases.

SGLang serves DeepSeek V4 / V4.1 (its chat encoding specs `dsv4` and `dsv41`) through two
modules that import `deepseek_recipe`: a prompt renderer and a token-level output adapter
(`sglang/srt/parser/deepseek_recipe_renderer.py` and `deepseek_recipe_output.py`). This module
makes the same calls on the package, in the same order and with the same argument shapes, and
nothing else, so one case can run against the official wheel (inside its side venv) and against
ours and give records that must be equal. It was written from reading SGLang's modules; none of
their code is copied. The request-level rewriting SGLang does before these calls (thinking flag,
`developer` role, forced tool choice, `continue_final_message`) is SGLang's business: a case body
is what SGLang would hand to the package.

The calls, by stage:

* set-up (once per server): `SpecialTokens(image=...)` with the checkpoint's image spelling,
  `ConversionOptions().with_special_tokens(...)`, `DeepseekV4Encoding()` or
  `DeepseekV41Encoding()`, `ModelVersion.DeepseekV4Pro` or `.DeepseekV41Flash`,
  `Tokenizer.from_str(<checkpoint tokenizer.json text>)`, and
  `encoding.with_special_tokens(...).with_tokenizer(...)`;
* prompt: `ChatCompletionRequest(body).convert(options)`, on failure `ConversionError.body` (JSON
  text whose `error.message` SGLang reports), `encoding.encode(conversation)`, and for images
  `encoding.render_conversation(conversation).image_sources`, each read as `.url or .data_url`;
* parse start: `converted.parsing_options.thinking_initial_stage` and the
  `ThinkingInitialStage.ReasoningStart` / `.ContentContinuation` members;
* output: `ParsingOptions(parse_tool_calls=, parse_json_output=, thinking_initial_stage=,
  special_tokens=)`, `ConversationRequest(Conversation(), model_version)`,
  `ChatCompletionRequest.chunk_generator(request, "", model)`,
  `StreamProcessor(generator, options, tokenizer)`, `.finished`,
  `.push(InferenceChunk.tokens(ids))`, `.push(InferenceChunk.finish(InferenceFinishReason.Stop
  | .Length))`, `.finish()` (an aborted request) and `chunk.to_json()`.

Case layout (JSON)::

    {"name": str, "kind": "encode", "spec": "dsv4"|"dsv41", "tokenizer": "stock"|"checkpoint",
     "body": {chat request without "model"}, "images": bool}
    {"name": str, "kind": "parse", "spec": ..., "tokenizer": ..., "parse_tool_calls": bool,
     "parse_json_output": bool, "stage": null|"ReasoningStart"|"ReasoningContinuation"|
     "ContentContinuation", "feeds": [[id, ...], ...], "last": [id, ...],
     "finish": "stop"|"length"|"abort"}

Command line (used inside the official venv by `generate_sglang.py`)::

    python sglang_calls.py CASES.json TOKENIZER.json OUT.json
"""

from __future__ import annotations

import json
import sys

from stream_replay import normalise

MODEL_NAMES = {"dsv4": "DeepSeek-V4-Pro", "dsv41": "DeepSeek-V4.1-Flash"}
# The image spelling of the released checkpoints' tokenizer, which SGLang passes as an override.
CHECKPOINT_IMAGE_TOKEN = "<｜deepseek_image｜>"
# Added-vocabulary entries the stock tokenizer lacks but a V4.1 checkpoint tokenizer carries.
CHECKPOINT_ADDED = {"<｜System｜>": 129280, CHECKPOINT_IMAGE_TOKEN: 129281}



def checkpoint_tokenizer_json(stock_json_text: str) -> str:
    """The stock tokenizer with the checkpoint-only added tokens appended (see CHECKPOINT_ADDED)."""
    data = json.loads(stock_json_text)
    for content, token_id in CHECKPOINT_ADDED.items():
        data["added_tokens"].append({"id": token_id, "content": content, "single_word": False,
                                     "lstrip": False, "rstrip": False, "normalized": False,
                                     "special": True})
    return json.dumps(data, ensure_ascii=False)


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


class Server:
    """What SGLang builds once per served model: options, encoding and tokenizer."""

    def __init__(self, dr, spec: str, tokenizer_json: str):
        self.dr = dr
        self.model = MODEL_NAMES[spec]
        self.special_tokens = dr.SpecialTokens(image=CHECKPOINT_IMAGE_TOKEN)
        self.options = dr.ConversionOptions().with_special_tokens(self.special_tokens)
        if spec == "dsv4":
            encoding = dr.DeepseekV4Encoding()
            self.model_version = dr.ModelVersion.DeepseekV4Pro
        else:
            encoding = dr.DeepseekV41Encoding()
            self.model_version = dr.ModelVersion.DeepseekV41Flash
        self.tokenizer = dr.Tokenizer.from_str(tokenizer_json)
        self.encoding = encoding.with_special_tokens(self.special_tokens).with_tokenizer(self.tokenizer)

    def encode(self, body: dict, images: bool) -> dict:
        """Prompt IDs (or the error SGLang would report), image URLs and the parse start."""
        dr = self.dr
        request = dict(body, model=self.model)
        try:
            converted = dr.ChatCompletionRequest(request).convert(self.options)
        except dr.ConversionError as e:
            return {"conversion_error": json.loads(e.body)}
        except Exception as e:  # noqa: BLE001 - the record compares the failure itself
            return {"request_error": _error(e)}
        stage = converted.parsing_options.thinking_initial_stage
        record = {"stage": None if stage is None else _stage_name(dr, stage)}
        try:
            record["ids"] = list(self.encoding.encode(converted.conversation))
        except Exception as e:  # noqa: BLE001
            record["encode_error"] = _error(e)
        if images:
            rendered = self.encoding.render_conversation(converted.conversation)
            record["image_urls"] = [s.url or s.data_url for s in rendered.image_sources]
        return record

    def parse(self, case: dict) -> list:
        """Each step's output chunks (as JSON) the way SGLang's output parser drives the stream."""
        dr = self.dr
        stage = case["stage"]
        options = dr.ParsingOptions(
            parse_tool_calls=case["parse_tool_calls"],
            parse_json_output=case["parse_json_output"],
            thinking_initial_stage=None if stage is None else getattr(dr.ThinkingInitialStage, stage),
            special_tokens=self.special_tokens,
        )
        request = dr.ConversationRequest(dr.Conversation(), self.model_version)
        generator = dr.ChatCompletionRequest.chunk_generator(request, "", self.model)
        processor = dr.StreamProcessor(generator, options, self.tokenizer)
        steps = []
        for ids in case["feeds"]:
            steps.append(self._step(processor, lambda: processor.push(dr.InferenceChunk.tokens(ids))))
        steps.append(self._step(processor, lambda: self._finish(processor, case)))
        return steps

    def _finish(self, processor, case):
        dr = self.dr
        chunks = list(processor.push(dr.InferenceChunk.tokens(case["last"]))) if case["last"] else []
        if not processor.finished:
            reason = {"stop": dr.InferenceFinishReason.Stop,
                      "length": dr.InferenceFinishReason.Length}.get(case["finish"])
            if reason is None:
                chunks += processor.finish()
            else:
                chunks += processor.push(dr.InferenceChunk.finish(reason))
        return chunks

    @staticmethod
    def _step(processor, action) -> dict:
        if processor.finished:
            return {"skipped": True}
        try:
            return {"chunks": [normalise(json.loads(c.to_json())) for c in action()],
                    "finished": processor.finished}
        except Exception as e:  # noqa: BLE001
            return {"error": _error(e)}


def _stage_name(dr, stage) -> str:
    for name in ("ReasoningStart", "ReasoningContinuation", "ContentContinuation"):
        if stage == getattr(dr.ThinkingInitialStage, name):
            return name
    raise ValueError(f"unknown thinking stage {stage!r}")


def run_cases(dr, cases: list, stock_tokenizer_json: str) -> list:
    """One record per case, in order; servers are built once per (spec, tokenizer)."""
    tokenizers = {"stock": stock_tokenizer_json,
                  "checkpoint": checkpoint_tokenizer_json(stock_tokenizer_json)}
    servers = {}
    records = []
    for case in cases:
        key = (case["spec"], case["tokenizer"])
        if key not in servers:
            servers[key] = Server(dr, case["spec"], tokenizers[case["tokenizer"]])
        server = servers[key]
        if case["kind"] == "encode":
            records.append(server.encode(case["body"], case.get("images", False)))
        else:
            records.append(server.parse(case))
    return records


def main(argv: list) -> None:
    import deepseek_recipe as dr

    cases_path, tokenizer_path, out_path = argv
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    with open(tokenizer_path, encoding="utf-8") as f:
        stock = f.read()
    records = run_cases(dr, cases, stock)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(records, f, ensure_ascii=False)


if __name__ == "__main__":
    main(sys.argv[1:])
