"""Chat templates (cattn.models.chat, CausalLM.apply_chat_template): the
rendered prompt against transformers' own renderer
(transformers.utils.chat_template_utils.render_jinja_template) for the
template shapes in the wild (ChatML / Qwen2, Llama 3, Phi-3, Mistral's
raise_exception, tools through tojson), the sandbox, and the errors."""
import sys

import pytest

jinja2 = pytest.importorskip("jinja2", reason="jinja2 renders chat templates")

from cattn.models import chat  # noqa: E402

CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ '<|im_start|>system\\nYou are a helpful assistant<|im_end|>\\n' }}{% endif %}"
          "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
LLAMA3 = ("{{ bos_token }}{% for message in messages %}{% set content = '<|start_header_id|>' + "
          "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}"
          "{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
PHI3 = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}"
        "{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}"
        "{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|end|>' + '\\n'}}"
        "{% endif %}{% endfor %}")
MISTRAL = ("{{ bos_token }}{% for message in messages %}"
           "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
           "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
           "{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
           "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}"
           "{% endfor %}")
TOOLS = ("{%- if tools %}{{- 'Tools: ' + tools | tojson + '\\n' }}{%- endif %}\n"
         "{%- for m in messages %}\n  {{- m.role }}: {{ m.content }}\n{% endfor %}"
         "{%- if add_generation_prompt %}assistant:{% endif %}")
MESSAGES = [{"role": "system", "content": "Be brief. ünïcode ✓"},
            {"role": "user", "content": "Hi there!"},
            {"role": "assistant", "content": "  Hello.  "},
            {"role": "user", "content": "What is 2+2?"}]
SPECIAL = {"bos_token": "<s>", "eos_token": "</s>"}


@pytest.mark.parametrize("template", [CHATML, LLAMA3, PHI3, TOOLS], ids=["chatml", "llama3", "phi3", "tools"])
@pytest.mark.parametrize("gen", [True, False])
def test_renders_as_transformers(template, gen):
    cu = pytest.importorskip("transformers.utils.chat_template_utils",
                             reason="transformers is the reference renderer")
    for messages in (MESSAGES, MESSAGES[1:]):
        extra = {"tools": [{"name": "add", "parameters": {"a": "int", "b": "ünï"}}]} \
            if template is TOOLS else {}
        got = chat.render_chat(template, messages, gen, **SPECIAL, **extra)
        want = cu.render_jinja_template(conversations=[messages], chat_template=template,
                                        add_generation_prompt=gen, **SPECIAL, **extra)
        want = want[0][0] if isinstance(want, tuple) else want
        want = want[0] if isinstance(want, list) else want
        assert got == want


def test_raise_exception_and_sandbox():
    ok = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert chat.render_chat(MISTRAL, ok, **SPECIAL) == "<s>[INST] a [/INST]b</s>"
    with pytest.raises(jinja2.exceptions.TemplateError, match="roles must alternate"):
        chat.render_chat(MISTRAL, ok[::-1], **SPECIAL)
    hostile = "{{ ''.__class__.__mro__[1].__subclasses__() }}"
    with pytest.raises(jinja2.exceptions.SecurityError):
        chat.render_chat(hostile, ok)
    with pytest.raises(jinja2.exceptions.SecurityError):
        chat.render_chat("{{ messages.append.__self__.__class__ }}{{ cycler.__init__.__globals__ }}", ok)


def test_errors():
    with pytest.raises(ValueError, match="no chat template"):
        chat.render_chat(None, MESSAGES)
    for bad in ([], [{"content": "x"}], "hello", [{"role": 1}]):
        with pytest.raises(ValueError, match="messages must be"):
            chat.render_chat(CHATML, bad)


def test_without_jinja2_the_error_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "jinja2", None)
    monkeypatch.setattr(chat, "_COMPILED", {})
    with pytest.raises(ImportError, match="jinja2"):
        chat.render_chat(CHATML, MESSAGES)


def test_folder_template(tmp_path):
    import json
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": [{"name": "default", "template": CHATML}, {"name": "tool_use", "template": TOOLS}],
         "bos_token": {"content": "<s>"}, "eos_token": "</s>"}))
    t, special = chat.folder_chat_template(str(tmp_path))
    assert t == CHATML and special == SPECIAL
    (tmp_path / "chat_template.jinja").write_text(PHI3)
    assert chat.folder_chat_template(str(tmp_path))[0] == PHI3
    assert chat.folder_chat_template(str(tmp_path / "absent")) == (None, {})
