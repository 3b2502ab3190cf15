"""Empty and whitespace-only files given to the command line are bad input (exit status 2 with
a message naming the file), never "divergent" or an empty parse (issue #21, item 3: an empty
`--prompt` or `--ids` file was answered with "divergent", exit 1). Run through the real
command line, one process per case, for every file argument of every subcommand."""

import json
import subprocess
import sys

import deepseek_recipe as dr
import pytest
from stream_support import tokenizer_path

REQUEST = {"model": "DeepSeek-V4.1-Flash", "thinking": {"type": "disabled"},
           "messages": [{"role": "user", "content": "Hello"}]}


def cli(*argv, stdin=""):
    env_tok = ["--tokenizer", tokenizer_path()] if argv[0] in ("check", "parse", "check-stream", "encode") else []
    done = subprocess.run([sys.executable, "-m", "deepseek_recipe", *argv, *env_tok], input=stdin,
                          capture_output=True, text=True, encoding="utf-8", timeout=120)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def files(tmp_path):
    def write(name, value):
        p = tmp_path / name
        p.write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")
        return str(p)
    return write


@pytest.mark.parametrize("content, message", [("", "is empty"), (" \n\t\n", "holds only whitespace")])
def test_check_prompt_and_ids_files(files, content, message):
    req = files("r.json", REQUEST)
    for flag in ("--prompt", "--ids", "--template"):
        path = files("backend.txt", content)
        code, out, err = cli("check", req, flag, path)
        assert (code, out) == (2, ""), (flag, code, out, err)
        assert f"error: {path} {message}" in err, (flag, err)


def test_check_request_file_and_stdin(files):
    ids = files("ids.json", [1, 2, 3])
    for content in ("", "   \n"):
        code, out, err = cli("check", files("r.json", content), "--ids", ids)
        assert code == 2 and out == "" and "r.json" in err and ("empty" in err or "whitespace" in err), err
    code, _, err = cli("check", "-", "--ids", ids, stdin="")
    assert code == 2 and "standard input is empty" in err


def test_check_empty_token_id_list_and_empty_template_string(files):
    req = files("r.json", REQUEST)
    code, _, err = cli("check", req, "--ids", files("ids.json", "[]"))
    assert code == 2 and "empty list of token IDs" in err
    code, _, err = cli("check", req, "--template", files("tokenizer_config.json", {"chat_template": " "}))
    assert code == 2 and "empty chat_template" in err


def test_check_encoder_command_that_prints_nothing(files):
    req = files("r.json", REQUEST)
    for program in ("pass", "print()", "print('[]')", "import json; print(json.dumps({'prompt': ' '}))"):
        code, out, err = cli("check", req, "--command", f"{sys.executable} -c \"{program}\"")
        assert code == 2 and out == "" and ("empty" in err or "printed nothing" in err), (program, code, err)


def test_render_encode_parse_check_stream(files):
    empty, blank = files("empty.json", ""), files("blank.json", "\n \n")
    out_ids = files("out.json", [16, 17])
    parsed = files("parsed.json", {"content": "x"})
    cases = [("render", empty), ("encode", blank),
             ("parse", empty), ("parse", blank, "--text"), ("parse", out_ids, "--request", empty),
             ("check-stream", empty, parsed), ("check-stream", blank, parsed, "--text"),
             ("check-stream", out_ids, blank), ("check-stream", out_ids, parsed, "--request", empty)]
    for argv in cases:
        code, out, err = cli(*argv)
        assert code == 2 and out == "", (argv, code, out, err)
        assert err.startswith("error: ") and ("is empty" in err or "only whitespace" in err), (argv, err)
    code, _, err = cli("parse", files("ids.json", "[]"))
    assert code == 2 and "empty list of token IDs" in err


def test_empty_tokenizer_file(files):
    req = files("r.json", REQUEST)
    done = subprocess.run([sys.executable, "-m", "deepseek_recipe", "encode", req, "--tokenizer", files("tok.json", "")],
                          capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert done.returncode == 2 and "is empty" in done.stderr


def test_native_checker_refuses_empty_output():
    tok = dr.Tokenizer.from_file(tokenizer_path())
    conv = dr.ChatCompletionRequest(REQUEST).convert(dr.ConversionOptions()).conversation
    enc = dr.DeepseekV41Encoding().with_tokenizer(tok)
    with pytest.raises(ValueError, match="empty"):
        dr.check_token_ids(enc, conv, [])
    for prompt in ("", " \n"):
        with pytest.raises(ValueError, match="empty"):
            dr.check_prompt_text(enc, conv, prompt)
