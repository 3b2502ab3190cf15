"""The codec's table of request APIs (`deepseek_recipe.apis`): one entry per API, read by the command line
and the engine's protocol API (no codec class named by a string anywhere)."""

from __future__ import annotations

import json

import deepseek_recipe as dr
import pytest
from deepseek_recipe import apis
from deepseek_recipe.cli import inputs

BODIES = {
    "chat.completions": {"model": "DeepSeek-V4-Pro", "messages": [{"role": "user", "content": "hi"}]},
    "responses": {"model": "DeepSeek-V4-Pro", "input": "hi"},
    "messages": {"model": "DeepSeek-V4-Pro", "max_tokens": 16, "system": "be brief",
                 "messages": [{"role": "user", "content": "hi"}]},
}


def test_the_table_holds_each_api_once_under_every_key():
    assert [a.name for a in apis.APIS] == ["chat.completions", "responses", "messages"]
    for key in ("name", "format", "path", "id_prefix"):
        assert len({getattr(a, key) for a in apis.APIS}) == len(apis.APIS), key
    for api in apis.APIS:
        assert apis.BY_NAME[api.name] is api and apis.BY_FORMAT[api.format] is api and apis.BY_PATH[api.path] is api
        assert api.path == "/v1/" + api.name.replace(".", "/")


@pytest.mark.parametrize("api", apis.APIS, ids=lambda a: a.name)
def test_each_entry_names_classes_that_serve_the_api(api):
    request = api.request(BODIES[api.name])
    assert isinstance(request, api.request)
    converted = request.convert(dr.ConversionOptions())
    generator = api.request.chunk_generator(converted, api.id_prefix + "1", "m")
    assert isinstance(generator, api.chunk_generator)
    response = api.response(api.id_prefix + "1", "m", 0, 3, 0)
    assert json.loads(response.to_json())["id"] == api.id_prefix + "1"


@pytest.mark.parametrize("api", apis.APIS, ids=lambda a: a.name)
@pytest.mark.parametrize("body", ["[]", "{", '"text"'])
def test_a_body_that_is_no_request_is_a_value_error(api, body):
    with pytest.raises(ValueError):
        api.request(body)


def test_the_command_line_reads_the_same_table():
    assert inputs.FORMATS == (*(a.format for a in apis.APIS), "conversation")
    for name, body in BODIES.items():
        api = apis.BY_NAME[name]
        assert inputs.detect_format(body) == api.format
        assert inputs.prepare(body).fmt == api.format


def test_the_server_reads_the_same_table():
    from deepseek_recipe.server import protocols

    for spec, api in ((protocols.CHAT, apis.CHAT_COMPLETIONS), (protocols.RESPONSES, apis.RESPONSES),
                      (protocols.MESSAGES, apis.MESSAGES)):
        assert (spec.name, spec.path, spec.request_cls, spec.response_cls, spec.id_prefix) == \
            (api.name, api.path, api.request, api.response, api.id_prefix)
