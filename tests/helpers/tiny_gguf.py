"""Write a tiny random-weight llama-architecture GGUF that a real llama-server loads.

No download: the tokenizer is a small SentencePiece-style vocabulary (control tokens, 256 byte
fallbacks, printable ASCII and word pieces) and the weights are seeded random numbers, so the same
arguments give the same file. Output rows of special and byte tokens are zeroed so generation stays
printable text. `python -m tests.helpers.tiny_gguf OUT.gguf [--layers N --embd N ...]`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "it",
    "this",
    "be",
    "are",
    "or",
    "an",
    "have",
    "not",
    "which",
    "one",
    "all",
    "were",
    "when",
    "there",
    "can",
    "more",
    "if",
    "out",
    "so",
    "what",
    "up",
    "said",
    "about",
    "into",
    "than",
    "them",
    "only",
    "other",
    "new",
    "some",
    "could",
    "time",
    "these",
    "two",
    "may",
    "then",
    "do",
    "first",
    "any",
    "like",
    "now",
    "my",
    "such",
    "make",
    "over",
    "our",
    "even",
    "most",
    "after",
    "also",
    "did",
    "many",
    "before",
    "must",
    "through",
    "back",
    "years",
    "where",
    "much",
    "your",
    "way",
    "well",
    "down",
    "should",
    "because",
    "each",
    "just",
    "those",
    "people",
    "how",
    "too",
    "good",
    "very",
    "great",
    "world",
    "hello",
    "model",
    "token",
    "slot",
    "cache",
    "queue",
    "engine",
    "server",
    "request",
    "stream",
    "memory",
    "pool",
    "node",
    "gpu",
    "fast",
    "slow",
    "ready",
    "random",
    "sound",
    "long",
    "call",
    "two",
    "with",
]

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    import gguf

    normal, unknown, control, byte = (
        gguf.TokenType.NORMAL,
        gguf.TokenType.UNKNOWN,
        gguf.TokenType.CONTROL,
        gguf.TokenType.BYTE,
    )
    tokens: list[str] = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    types: list[int] = [unknown, control, control, control, control]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [byte] * 256
    pieces: list[str] = ["▁"] + [chr(c) for c in range(33, 127)]
    for word in WORDS:
        for end in range(1, len(word) + 1):
            piece = "▁" + word[:end]
            if piece not in pieces:
                pieces.append(piece)
    tokens += pieces
    types += [normal] * len(pieces)
    scores = [0.0] * 261 + [float(-i) if len(p) == 1 else float(len(p)) * 10 for i, p in enumerate(pieces)]
    return tokens, scores, [int(t) for t in types]


def write_tiny_gguf(
    path: Path,
    *,
    layers: int = 2,
    embd: int = 64,
    heads: int = 4,
    kv_heads: int = 4,
    ff: int = 128,
    ctx: int = 2048,
    f16: bool = False,
    seed: int = 0,
    name: str = "tiny",
) -> Path:
    import gguf

    rng = np.random.default_rng(seed)
    tokens, scores, types = vocabulary()
    vocab = len(tokens)
    head_dim = embd // heads
    dtype = np.float16 if f16 else np.float32

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(name)
    writer.add_context_length(ctx)
    writer.add_embedding_length(embd)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ff)
    writer.add_rope_dimension_count(head_dim)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if f16 else gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHATML)

    def weight(rows: int, cols: int, scale: float = 0.08) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale).astype(dtype)

    def norm(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    writer.add_tensor("token_embd.weight", weight(vocab, embd, 0.5).astype(np.float32))
    for i in range(layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", norm(embd))
        writer.add_tensor(f"blk.{i}.attn_q.weight", weight(embd, embd))
        writer.add_tensor(f"blk.{i}.attn_k.weight", weight(kv_heads * head_dim, embd))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weight(kv_heads * head_dim, embd))
        writer.add_tensor(f"blk.{i}.attn_output.weight", weight(embd, embd))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", norm(embd))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(ff, embd))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(ff, embd))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(embd, ff))
    writer.add_tensor("output_norm.weight", norm(embd))
    output = rng.standard_normal((vocab, embd)).astype(np.float32)
    output[:261] = 0.0  # special and byte tokens never win: generated text stays printable
    output *= 4.0 / max(float(np.std(output[261:] @ np.ones(embd, dtype=np.float32))), 1e-6)
    writer.add_tensor("output.weight", output.astype(dtype))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    for flag, default in (
        ("layers", 2),
        ("embd", 64),
        ("heads", 4),
        ("kv-heads", 4),
        ("ff", 128),
        ("ctx", 2048),
        ("seed", 0),
    ):
        parser.add_argument(f"--{flag}", type=int, default=default)
    parser.add_argument("--f16", action="store_true")
    args = parser.parse_args()
    write_tiny_gguf(
        args.out,
        layers=args.layers,
        embd=args.embd,
        heads=args.heads,
        kv_heads=args.kv_heads,
        ff=args.ff,
        ctx=args.ctx,
        f16=args.f16,
        seed=args.seed,
    )
    print(args.out)


if __name__ == "__main__":
    main()
