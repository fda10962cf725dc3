"""`cattn chat MODEL`: an interactive multi-turn chat in the terminal with a
decoder LLM (a GGUF file or a checkpoint folder with a chat template),
streaming each reply (registered by cattn.cli through `add_command`).
Lines are user turns; `/reset` starts over (keeping --system), Ctrl-D or
`/exit` ends. Not here: the template or generation (cattn.models.chat,
CausalLM.chat)."""
import sys


def add_command(sub):
    from . import add_threads_option
    from .models import add_kv_dtype_option, add_weights_option
    p = sub.add_parser("chat", help="chat with a Llama / Qwen2 model (GGUF file or folder) "
                                    "in the terminal, streaming the replies")
    p.add_argument("path", metavar="MODEL", help="GGUF file, or a Hugging Face folder with "
                                                 "tokenizer.json and a chat template")
    p.add_argument("--system", metavar="TEXT", default=None, help="a system message first")
    p.add_argument("--max-new-tokens", type=int, default=512, metavar="N")
    p.add_argument("--temperature", type=float, default=None, metavar="T",
                   help="sample at this temperature (default: greedy)")
    p.add_argument("--top-p", type=float, default=None, metavar="P")
    p.add_argument("--seed", type=int, default=None, metavar="S")
    add_weights_option(p, gguf=True)
    add_kv_dtype_option(p)
    add_threads_option(p)
    p.set_defaults(func=_chat)


def _chat(args, stdin=None, stdout=None):
    import cattn
    from ..models import CausalLM
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    try:
        if args.threads is not None:
            cattn.set_num_threads(args.threads)
        lm = CausalLM.from_pretrained(args.path, weights=args.weights,
                                      kv_dtype=args.kv_dtype, tokenizer_first=True)
        lm.text_tokenizer()
        if not lm.chat_template:
            raise ValueError(f"{args.path} has no chat template (tokenizer.chat_template or "
                             "tokenizer_config.json's chat_template)")
    except (ImportError, ValueError, TypeError, OSError) as e:
        print(f"cattn: error: {e}", file=sys.stderr)
        return 2
    sample = args.temperature is not None or args.top_p is not None
    opts = dict(do_sample=sample, temperature=1.0 if args.temperature is None else args.temperature,
                top_p=args.top_p, seed=args.seed)
    start = [{"role": "system", "content": args.system}] if args.system else []
    messages = list(start)
    print("cattn chat: type a message; /reset starts over, Ctrl-D ends.", file=sys.stderr)
    while True:
        stdout.write("> ")
        stdout.flush()
        line = stdin.readline()
        if not line or line.strip() == "/exit":
            stdout.write("\n")
            return 0
        line = line.rstrip("\n")
        if line.strip() == "/reset":
            messages = list(start)
            stdout.write("(conversation reset)\n")
            continue
        if not line.strip():
            continue
        messages.append({"role": "user", "content": line})
        reply = []
        try:
            for piece in lm.chat(messages, max_new_tokens=args.max_new_tokens, stream=True, **opts):
                reply.append(piece)
                stdout.write(piece)
                stdout.flush()
        except ValueError as e:                 # e.g. the context is full
            print(f"\ncattn: error: {e}", file=sys.stderr)
            messages.pop()
            continue
        stdout.write("\n")
        messages.append({"role": "assistant", "content": "".join(reply)})
