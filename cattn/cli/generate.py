"""`cattn generate PATH "prompt"`: stream a decoder LLM's continuation of a
prompt to the terminal (cattn.models.CausalLM), then the prefill and decode
speeds (registered by cattn.cli through `add_command`)."""
import sys


def add_command(sub):
    from . import add_threads_option
    from .models import add_kv_dtype_option, add_weights_option
    p = sub.add_parser("generate", help="continue a prompt with a Llama / Qwen2 / GPT-2 "
                                        "checkpoint folder (streams the text)")
    p.add_argument("path", metavar="PATH", help="Hugging Face checkpoint folder (config.json, "
                                                "*.safetensors, tokenizer.json) or a GGUF file "
                                                "(its own tokenizer)")
    p.add_argument("prompt", metavar="PROMPT")
    p.add_argument("--max-new-tokens", type=int, default=64, metavar="N")
    p.add_argument("--temperature", type=float, default=None, metavar="T",
                   help="sample at this temperature (default: greedy unless --top-k/--top-p)")
    p.add_argument("--top-k", type=int, default=None, metavar="K")
    p.add_argument("--top-p", type=float, default=None, metavar="P")
    p.add_argument("--seed", type=int, default=None, metavar="S")
    add_weights_option(p, gguf=True)
    add_kv_dtype_option(p)
    add_threads_option(p)
    p.set_defaults(func=_generate)


def _generate(args):
    import cattn
    from ..models import CausalLM
    try:
        if args.threads is not None:
            cattn.set_num_threads(args.threads)
        lm = CausalLM.from_pretrained(args.path, weights=args.weights,
                                      kv_dtype=args.kv_dtype,
                                      tokenizer_first=True)
        sample = any(v is not None for v in (args.temperature, args.top_k, args.top_p))
        pieces = lm.generate(args.prompt, max_new_tokens=args.max_new_tokens, do_sample=sample,
                             temperature=1.0 if args.temperature is None else args.temperature,
                             top_k=args.top_k, top_p=args.top_p, seed=args.seed, stream=True)
        sys.stdout.write(args.prompt)
        for piece in pieces:
            sys.stdout.write(piece)
            sys.stdout.flush()
    except (ImportError, ValueError, TypeError, OSError) as e:
        print(f"\ncattn: error: {e}", file=sys.stderr)
        return 2
    s = lm.stats
    rate = lambda n, t: f"{n / t:.1f} tokens/s" if t > 0 else "-"  # noqa: E731
    print(f"\n\nprefill: {s['prefill_tokens']} tokens, {rate(s['prefill_tokens'], s['prefill_s'])}"
          f" | decode: {s['decode_tokens']} tokens, {rate(s['decode_tokens'], s['decode_s'])}",
          file=sys.stderr)
    return 0
