"""Write a tiny random-weight Llama (Hugging Face format) that vLLM's CPU build serves.

Run with the vLLM virtualenv's python (it has transformers and tokenizers):
`python tests/helpers/tiny_hf.py OUT_DIR`. No download: a byte-level BPE tokenizer is trained on text
this script writes, and the weights are seeded. head_dim is 32 because vLLM's CPU attention backend
does not support 16 (shared/reference/real-vllm.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SPECIAL = ["<unk>", "<s>", "</s>", "<pad>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + (message['content'] or '') + "
    "'<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
CORPUS = (
    "the pool serves tokens to every team member while the queue stays short and memory holds the cache. "
    "engines restart, counters reset, the operator watches kv cache usage and time to first token. "
    "hello world, what is the weather in paris today? call the tool get_weather with the city name. "
)


def main(out: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator([CORPUS * 40], trainer=trainer)
    bos = tokenizer.token_to_id("<s>")
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=512,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=2048,
        bos_token_id=bos,
        eos_token_id=tokenizer.token_to_id("</s>"),
        pad_token_id=tokenizer.token_to_id("<pad>"),
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    (out / "READY").write_text(json.dumps({"params": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
