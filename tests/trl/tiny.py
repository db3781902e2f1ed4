"""A tiny tokenizer and a tiny randomly initialised model, built here: nothing from a hub.

The tokenizer is byte-level BPE trained on a few sentences, with the chat
template TRL ships for Qwen3 (so TRL can render tool calls and parse them back).
Two added tokens each spell a whole tool call of the ``answer`` tool, one with
the right GSM8K answer and one with a wrong one; a generation bias makes the
random model emit one of them and then end its turn, so every rollout calls the
interaction through the tool and the reward depends on which answer was drawn.
"""

from __future__ import annotations

import json
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen3Config
from trl.chat_template_utils import qwen3_chat_template

QUESTION = "Janet has 16 eggs, eats 3 and bakes 4; she sells the rest at $2. How much?"
RIGHT, WRONG = "18", "17"
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def tool_call(answer: str) -> str:
    arguments = {"content": f"The total is\n#### {answer}"}
    call = json.dumps({"name": "answer", "arguments": arguments})
    return f"<tool_call>\n{call}\n</tool_call>"


def build_tokenizer() -> PreTrainedTokenizerFast:
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [QUESTION, "user assistant system tool answer content", "#### 18 #### 17"]
    backend.train_from_iterator(corpus * 4, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    tokenizer.add_tokens([tool_call(RIGHT), tool_call(WRONG)])
    tokenizer.chat_template = qwen3_chat_template
    return tokenizer


def build_model(tokenizer: PreTrainedTokenizerFast) -> Any:
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return AutoModelForCausalLM.from_config(config)


def answer_bias(tokenizer: PreTrainedTokenizerFast) -> list[list[Any]]:
    """``sequence_bias``: call the tool with either answer, then end the turn."""
    right = tokenizer.convert_tokens_to_ids(tool_call(RIGHT))
    wrong = tokenizer.convert_tokens_to_ids(tool_call(WRONG))
    eos = tokenizer.eos_token_id
    return [[[right], 40.0], [[wrong], 40.0], [[right, eos], 90.0], [[wrong, eos], 90.0]]
