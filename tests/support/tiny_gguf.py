"""Write a tiny random-weight llama-architecture GGUF that llama.cpp's real llama-server loads.

    python tests/support/tiny_gguf.py VOCAB.gguf OUT.gguf [--layers 2] [--embd 64] [--heads 4] [--perturb 0.0]

Run by ``scripts/build_llama_server.sh`` with the Python of its cache's ``gguf-venv`` (numpy and the
``gguf-py`` of the same llama.cpp sdist; the project's venv has neither). ``VOCAB.gguf`` is a vocab-only
file of llama.cpp (``models/ggml-vocab-llama-spm.gguf``): its ``tokenizer.*`` keys are copied, so the
model has the real 32,000-token SentencePiece vocabulary. F16 weights, the output tied to the embedding,
and a simple chat template, so ``/v1/chat/completions`` works. About 4.9 MB, written in 2 s.

``--perturb EPS`` writes the weights of the same seed plus EPS times Gaussian noise: a draft model that
agrees with the target only part of the time (speculative decoding accepts some of its tokens, not all).

After ``shared/reference/testing/real-engines/make_tiny_gguf.py`` (the team's recipe). The output is
gibberish; the server's slots, counters and timings are real.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


@dataclass(frozen=True)
class Shape:
    layers: int = 2
    embd: int = 64
    heads: int = 4
    ctx: int = 2048

    @property
    def feed_forward(self) -> int:
        return 2 * self.embd


def write_tiny_gguf(vocab: Path, out: Path, shape: Shape, *, seed: int = 0, perturb: float = 0.0) -> int:
    """Write the model to ``out``; returns its vocabulary size."""
    import gguf  # type: ignore[import-not-found]
    import numpy as np  # type: ignore[import-not-found]

    source = gguf.GGUFReader(str(vocab))
    n_vocab = len(source.fields["tokenizer.ggml.tokens"].data)
    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name(f"tiny-llama-{shape.layers}L-{shape.embd}d")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_context_length(shape.ctx)
    writer.add_embedding_length(shape.embd)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.feed_forward)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.heads)
    writer.add_rope_dimension_count(shape.embd // shape.heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    for key, field in source.fields.items():
        if key.startswith("tokenizer.") and key != "tokenizer.chat_template":
            kind = field.types[0]
            sub_type = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(key, field.contents(), kind, sub_type=sub_type)
    writer.add_chat_template(CHAT_TEMPLATE)

    weights = np.random.default_rng(seed)
    noise = np.random.default_rng(seed + 1000)

    def matrix(name: str, *dims: int) -> None:
        scale = 0.5 / np.sqrt(dims[-1])
        values = weights.normal(0, scale, dims).astype(np.float32)
        if perturb:
            values += perturb * noise.normal(0, scale, dims).astype(np.float32)
        writer.add_tensor(name, values.astype(np.float16))

    def norm(name: str) -> None:
        writer.add_tensor(name, np.ones(shape.embd, np.float32))

    embd, ff = shape.embd, shape.feed_forward
    matrix("token_embd.weight", n_vocab, embd)  # no output.weight: llama.cpp ties it to the embedding
    norm("output_norm.weight")
    for layer in range(shape.layers):
        block = f"blk.{layer}."
        norm(block + "attn_norm.weight")
        norm(block + "ffn_norm.weight")
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            matrix(block + name + ".weight", embd, embd)
        matrix(block + "ffn_gate.weight", ff, embd)
        matrix(block + "ffn_up.weight", ff, embd)
        matrix(block + "ffn_down.weight", embd, ff)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    count: int = n_vocab
    return count


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("vocab", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, default=Shape.layers)
    parser.add_argument("--embd", type=int, default=Shape.embd)
    parser.add_argument("--heads", type=int, default=Shape.heads)
    parser.add_argument("--ctx", type=int, default=Shape.ctx)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--perturb", type=float, default=0.0)
    args = parser.parse_args(argv)
    shape = Shape(layers=args.layers, embd=args.embd, heads=args.heads, ctx=args.ctx)
    n_vocab = write_tiny_gguf(args.vocab, args.out, shape, seed=args.seed, perturb=args.perturb)
    print(f"{args.out}: vocab {n_vocab}, {shape.layers} layers, embd {shape.embd}")


if __name__ == "__main__":
    main()
