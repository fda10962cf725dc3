"""cattn.models.chat — a model's chat template rendered into a prompt, as
transformers' apply_chat_template renders it.

What this file is: the template's source (a GGUF file's
`tokenizer.chat_template`, a folder's tokenizer_config.json "chat_template"
or chat_template.jinja), and its rendering with jinja2 in a sandbox
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loop controls;
`raise_exception`, `strftime_now` and a non-escaping `tojson`, the names
templates expect). Templates are untrusted code: the sandbox refuses
attribute access to internals, and jinja2 >= 3.1.6 (earlier versions
have sandbox escapes) is required. What it is not: generation (CausalLM.chat
uses this) or a tokenizer.

jinja2 is optional: pip install 'cattn[chat]' (or jinja2); without it a
chat call raises ImportError saying so.
"""
import json
import os
from datetime import datetime

__all__ = ["render_chat", "folder_chat_template", "builtin_chat_template", "JINJA_HINT"]

JINJA_HINT = ("chat templates need jinja2 >= 3.1.6: pip install jinja2 (or pip install "
              "'cattn[chat]')")
_COMPILED = {}

# general.architecture -> the template llama.cpp applies to a file of it that
# has no tokenizer.chat_template (llama.cpp's "gemma": no system role, a system
# message goes before the first user message; "assistant" is "model")
_BUILTIN = {
    "gemma3": (
        "{{ bos_token }}{% set ns = namespace(system='') %}"
        "{% for m in messages %}"
        "{% if m['role'] == 'system' %}{% set ns.system = ns.system + m['content'] | trim %}"
        "{% else %}{% set role = 'model' if m['role'] == 'assistant' else m['role'] %}"
        "<start_of_turn>{{ role }}\n"
        "{% if ns.system and role != 'model' %}{{ ns.system }}\n\n"
        "{% set ns.system = '' %}{% endif %}"
        "{{ m['content'] | trim }}<end_of_turn>\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"),
}


def builtin_chat_template(architecture):
    """The chat template of a GGUF file of `architecture` without one of its
    own (llama.cpp's built-in format for it), or None."""
    return _BUILTIN.get(architecture)


def _environment():
    try:
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise ImportError(JINJA_HINT) from None
    if tuple(int(p) for p in jinja2.__version__.split(".")[:3] if p.isdigit()) < (3, 1, 6):
        raise ImportError(f"{JINJA_HINT}; this is jinja2 {jinja2.__version__}")

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def _check_messages(messages):
    if (not isinstance(messages, (list, tuple)) or not messages
            or not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages)):
        raise ValueError("chat: messages must be a non-empty list of dicts with a 'role' (and "
                         "'content'), e.g. [{'role': 'user', 'content': 'Hi'}]")
    return [dict(m) for m in messages]


def render_chat(template, messages, add_generation_prompt=True, **variables):
    """The prompt string of `messages` ([{"role", "content"}, ...]) through
    the jinja2 chat `template`, with `add_generation_prompt` and the
    template's variables (bos_token, eos_token, tools, ...) as transformers
    passes them. jinja2's TemplateError for a template that raises or is
    malformed; SecurityError for one that reaches for internals."""
    if not isinstance(template, str) or not template:
        raise ValueError("chat: this model has no chat template (no tokenizer.chat_template in "
                         "the GGUF file, no chat_template in tokenizer_config.json)")
    compiled = _COMPILED.get(template)
    if compiled is None:
        compiled = _COMPILED[template] = _environment().from_string(template)
    return compiled.render(messages=_check_messages(messages),
                           add_generation_prompt=bool(add_generation_prompt), **variables)


def folder_chat_template(folder):
    """(template or None, {bos_token, eos_token, ...}) of a checkpoint
    folder: chat_template.jinja, else tokenizer_config.json's chat_template
    (a string, or a list of {"name", "template"}: the "default" one), and
    the config's special token strings."""
    cfg = {}
    path = os.path.join(folder, "tokenizer_config.json")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
    template = cfg.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    jinja = os.path.join(folder, "chat_template.jinja")
    if os.path.isfile(jinja):
        with open(jinja, encoding="utf-8") as f:
            template = f.read()
    special = {}
    for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
        v = cfg.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str):
            special[key] = v
    return (template if isinstance(template, str) else None), special


_ENDS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<|endoftext|>", "<|end_of_text|>", "</s>",
         "<end_of_turn>", "<|eom_id|>")


def end_of_turn_ids(lm, tok):
    """The ids a reply stops at: the model's EOS ids and the end-of-turn
    tokens its vocabulary has (<|im_end|>, <|eot_id|>, <|end|>, ...)."""
    ids = set(getattr(tok, "eot_ids", ()))
    eos = lm.generation_config.get("eos_token_id", lm.config.eos_token_id)
    ids.update(e for e in (eos if isinstance(eos, list) else [eos]) if isinstance(e, int))
    for t in _ENDS:
        i = tok.token_id(t)
        if i is not None:
            ids.add(int(i))
    return sorted(i for i in ids if 0 <= i < lm.config.vocab_size)


def chat_prompt(lm, messages, add_generation_prompt=True, tokenize=False, variables=None):
    """lm.apply_chat_template: the rendered prompt string, or its token ids
    (tokenize=True: special tokens written in the prompt become their ids;
    nothing added, the template writes BOS where it wants one)."""
    text = render_chat(lm.chat_template, messages, add_generation_prompt,
                       **{**lm.chat_special, **(variables or {})})
    if not tokenize:
        return text
    return lm.text_tokenizer().encode(text, add_special=False, parse_special=True)


def chat_reply(lm, messages, max_new_tokens, stream, generate_kwargs):
    """lm.chat: the reply to messages (generation from the rendered prompt,
    stopping at an end-of-turn token), or a generator of its text pieces."""
    from .tokenizer import StreamDecoder
    tok = lm.text_tokenizer()
    ids = chat_prompt(lm, messages, True, True)
    kwargs = dict(generate_kwargs)
    kwargs.setdefault("eos_token_id", end_of_turn_ids(lm, tok))
    ends = set(kwargs["eos_token_id"] if isinstance(kwargs["eos_token_id"], list)
               else [kwargs["eos_token_id"]])
    if not stream:
        out = [int(t) for t in lm.generate(ids, max_new_tokens=max_new_tokens, **kwargs)]
        return tok.decode([t for t in out if t not in ends])

    def pieces():
        dec = StreamDecoder(tok)
        for t in lm.generate(ids, max_new_tokens=max_new_tokens, stream=True, **kwargs):
            if int(t) in ends:
                break
            piece = dec.push(int(t))
            if piece:
                yield piece
        rest = dec.flush()
        if rest:
            yield rest
    return pieces()
