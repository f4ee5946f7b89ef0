#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build a tiny, trained Hugging Face model folder that the real SGLang answers the smoke prompts with.

    make_model.py OUTDIR

The lab runs the real SGLang (PyPI sglang 0.5.23) on CPU, so a deploy goes through SGLang's real
loader, forward pass, sampler and detokenizer.  The collection's smoke test
(plugins/module_utils/smoke.py) then judges the answers, and random weights answer junk
(" is is is is"), rightly called garbage.  So this script builds a model that knows the answers:

  "The capital city of France is"        -> " Paris. It is a large city on the river Seine."
  "Question: What is 17 + 25? Answer:"   -> " 42. It is the sum of the two numbers."
  chat "Say hello in one word."          -> "Hello!"

each followed by the end-of-sequence token <|im_end|>, so greedy decoding (temperature 0) stops there.

OUTDIR gets config.json, generation_config.json, tokenizer.json, tokenizer_config.json,
special_tokens_map.json and model.safetensors: a Qwen2ForCausalLM (hidden 64, 2 layers, 4 heads,
2 KV heads, tied embeddings, about 117 k parameters) in bfloat16, the dtype SGLang's CPU path runs it
in; about 0.25 MB.

Everything comes from this file, with no network and no file of the machine.  The byte-level BPE
tokenizer is trained on a fixed corpus built here: the smoke prompts and answers, a few more
questions and chat turns, some plain English sentences.  The weights are trained with torch on CPU
(fixed seed, one thread, a fixed number of AdamW steps) on exactly the token sequences SGLang will
see: the prompt as SGLang tokenizes it (no BOS; the chat prompt through the chat template), then the
answer, then <|im_end|>.  The extra sentences are there so that other prompts (a benchmark's random
token ids, /health_generate's prompt) get words back rather than one token over and over.

Before it writes OUTDIR the script checks, in float32 and again in bfloat16, that greedy decoding
gives every smoke answer and that each answer token wins by a clear logit margin; it exits 1 if not.
Run it with the SGLang venv's python (torch, transformers 5, tokenizers, safetensors); about 25 s of
CPU on one core.  Same machine and versions, same bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import torch
import transformers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PAD = "<|endoftext|>"
EOS = "<|im_end|>"
# Qwen2's pre-tokenizer regex (transformers/models/qwen2/tokenization_qwen2.py): every digit is a token
QWEN2_SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
               r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# The smoke prompts of plugins/module_utils/smoke.py (DEFAULT_PROMPTS) and the answers to learn.
SMOKE = [
    {"name": "capital", "prompt": "The capital city of France is",
     "answer": " Paris. It is a large city on the river Seine."},
    {"name": "arithmetic", "prompt": "Question: What is 17 + 25? Answer:",
     "answer": " 42. It is the sum of the two numbers."},
    {"name": "chat", "messages": [{"role": "user", "content": "Say hello in one word."}], "answer": "Hello!"},
]
SMOKE_NAMES = [item["name"] for item in SMOKE]

# Some English around the smoke answers: more questions, chat turns and plain sentences.
EXTRA_PAIRS = [
    ("The capital city of Italy is", " Rome. It is an old city on the river Tiber."),
    ("The capital city of Spain is", " Madrid. It is a large city in the middle of the country."),
    ("The capital city of Germany is", " Berlin. It is a large city on the river Spree."),
    ("Question: What is 2 + 3? Answer:", " 5. It is the sum of the two numbers."),
    ("Question: What is 10 + 20? Answer:", " 30. It is the sum of the two numbers."),
]
EXTRA_CHATS = [
    ("Say goodbye in one word.", "Goodbye!"),
    ("What color is the sky?", "The sky is blue on a clear day."),
    ("Name a fruit.", "An apple is a fruit."),
]
FILLER = [
    "The sun rises in the east and sets in the west.",
    "Water boils at one hundred degrees on a warm day by the sea.",
    "A small dog ran across the green field to meet the children.",
    "The old library keeps many books about history and science.",
    "She opened the window and the cool morning air came into the room.",
    "Trains leave the station every hour during the day.",
    "The farmer grows wheat, corn and apples on his land.",
    "We walked along the river and talked about the summer.",
    "The teacher wrote a short question on the board.",
    "Music can make a long evening feel short.",
    "He bought bread, milk and cheese at the market.",
    "The mountains were covered with snow in the winter.",
    "A good answer is short, clear and true.",
    "The city has a large park with tall trees and a quiet lake.",
    "Birds sing in the garden early in the morning.",
    "The computer answered the question in one second.",
]

FILES = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
         "special_tokens_map.json", "model.safetensors"]
SEED = 1234
STEPS = 400
LR = 3e-3
ANSWER_WEIGHT = 4.0  # answer tokens count 4x in the loss; prompt tokens are learned too
MIN_MARGIN = 2.0     # each answer token must beat the runner-up by this many logits (about 6 is seen)

MODEL_CONFIG = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "hidden_act": "silu", "tie_word_embeddings": True, "use_sliding_window": False,
    "sliding_window": None, "attention_dropout": 0.0, "initializer_range": 0.02, "use_cache": True,
}


def log(msg):
    """Print one progress line at once."""
    print(msg, flush=True)


def corpus_texts():
    """The fixed text the tokenizer is trained on: every prompt, answer and sentence above."""
    texts = []
    for item in SMOKE:
        if "prompt" in item:
            texts.append(item["prompt"] + item["answer"])
        else:
            texts.append(item["messages"][0]["content"] + "\n" + item["answer"])
    texts += [p + a for p, a in EXTRA_PAIRS]
    texts += [q + "\n" + a for q, a in EXTRA_CHATS]
    texts += FILLER
    texts.append("user\nassistant\n")
    return texts


def build_tokenizer(outdir, vocab_target=1024):
    """Train a byte-level BPE on corpus_texts(), write the three tokenizer files; return the raw tokenizer.

    Normalizer and pre-tokenizer are Qwen2's own (NFC, its split regex, byte level): transformers 5
    loads a qwen2 folder's tokenizer as Qwen2Tokenizer, which rebuilds exactly these around the vocab,
    so tokenizer.json alone (transformers 4, other tools) and transformers 5 cut text the same way.
    The corpus runs out of merges before vocab_target.
    """
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_target, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus_texts(), trainer)
    # the specials go last, as in Qwen's and Llama's vocabularies: token 0 is then "!", which is what a GPU's NaN
    # logits turn into (argmax of all-NaN picks index 0), so a broken kernel serves "!!!!" here as it does there
    tok.add_special_tokens(SPECIALS)
    if tok.id_to_token(0) != "!":
        raise SystemExit("make_model: token 0 is %r, not '!'" % tok.id_to_token(0))
    tok.save(os.path.join(outdir, "tokenizer.json"))
    with open(os.path.join(outdir, "tokenizer_config.json"), "w", encoding="utf-8") as fh:
        json.dump({"tokenizer_class": "Qwen2Tokenizer", "model_max_length": 2048,
                   "bos_token": None, "eos_token": EOS, "pad_token": PAD, "unk_token": None,
                   "chat_template": CHAT_TEMPLATE, "add_bos_token": False, "add_eos_token": False,
                   "add_prefix_space": False, "clean_up_tokenization_spaces": False}, fh, indent=1)
    with open(os.path.join(outdir, "special_tokens_map.json"), "w", encoding="utf-8") as fh:
        json.dump({"eos_token": EOS, "pad_token": PAD}, fh, indent=1)
    return tok


def training_examples(hf_tok):
    """Return ``[(name, prompt_ids, answer_ids)]``: each prompt tokenized as SGLang does, answer + EOS."""
    eos = hf_tok.convert_tokens_to_ids(EOS)

    def enc(text):
        return hf_tok(text)["input_ids"]

    def chat(content):
        return enc(hf_tok.apply_chat_template([{"role": "user", "content": content}],
                                              tokenize=False, add_generation_prompt=True))

    out = []
    for item in SMOKE:
        prompt = enc(item["prompt"]) if "prompt" in item else chat(item["messages"][0]["content"])
        out.append((item["name"], prompt, enc(item["answer"]) + [eos]))
    out += [("pair", enc(p), enc(a) + [eos]) for p, a in EXTRA_PAIRS]
    out += [("chat+", chat(q), enc(a) + [eos]) for q, a in EXTRA_CHATS]
    out += [("filler", enc(s)[:1], enc(s)[1:] + [eos]) for s in FILLER]
    return out


def same_ids_everywhere(raw_tok, hf_tok, examples):
    """True when tokenizer.json on its own cuts every prompt as the transformers tokenizer does."""
    for name, prompt, _answer in examples:
        ids = raw_tok.encode(hf_tok.decode(prompt, skip_special_tokens=False)).ids
        if ids != prompt:
            log(f"make_model: {name}: tokenizer.json gives {ids}, {type(hf_tok).__name__} gives {prompt}")
            return False
    return True


def batch(examples, pad_id):
    """Right-padded input ids, next-token labels and per-token loss weights (0 = no loss)."""
    width = max(len(p) + len(a) for _name, p, a in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.zeros((len(examples), width), dtype=torch.long)
    weight = torch.zeros((len(examples), width))
    for row, (_name, prompt, answer) in enumerate(examples):
        seq = prompt + answer
        ids[row, :len(seq)] = torch.tensor(seq)
        labels[row, :len(seq) - 1] = torch.tensor(seq[1:])     # position t predicts token t+1
        weight[row, :len(seq) - 1] = 1.0
        weight[row, len(prompt) - 1:len(seq) - 1] = ANSWER_WEIGHT
    return ids, labels, weight


def train(model, examples, pad_id):
    """STEPS full-batch AdamW steps, one-cycle learning rate; print the loss now and then."""
    ids, labels, weight = batch(examples, pad_id)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=STEPS, pct_start=0.1)
    model.train()
    for step in range(1, STEPS + 1):
        logits = model(input_ids=ids).logits.float()
        per_tok = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                                    reduction="none")
        loss = (per_tok * weight.reshape(-1)).sum() / weight.sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step == 1 or step % 50 == 0:
            log(f"  step {step:3d}  loss {loss.item():.4f}")
    model.eval()


def greedy(model, prompt, max_new, eos_id):
    """Greedy decoding, whole sequence each step; return ``(new_ids, min_margin)`` (top-1 minus top-2 logit)."""
    seq, out, margin = list(prompt), [], float("inf")
    with torch.no_grad():
        for _step in range(max_new):
            top = torch.topk(model(input_ids=torch.tensor([seq])).logits[0, -1].float(), 2)
            margin = min(margin, (top.values[0] - top.values[1]).item())
            out.append(int(top.indices[0]))
            if out[-1] == eos_id:
                break
            seq.append(out[-1])
    return out, margin


def check(model, examples, hf_tok, label):
    """Greedy-decode the smoke prompts and the extra questions; True when every smoke answer comes out.

    The plain sentences are left out: their one-token prompts ("The") are ambiguous on purpose.
    """
    eos_id = hf_tok.convert_tokens_to_ids(EOS)
    ok = True
    for name, prompt, answer in examples:
        if name == "filler":
            continue
        got, margin = greedy(model, prompt, len(answer) + 2, eos_id)
        good = got == answer and margin >= MIN_MARGIN
        if name in SMOKE_NAMES or not good:
            text = hf_tok.decode(got, skip_special_tokens=name in SMOKE_NAMES)
            log(f"  {label:8s} {name:10s} {text!r}  (min margin {margin:.2f}){'' if good else '  <-- WRONG'}")
        if name in SMOKE_NAMES:   # the extras only need to be learned roughly
            ok = ok and good
    return ok


def build(outdir):
    """Tokenizer, config, training, checks and weights, all written into ``outdir``; return the exit status."""
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    log(f"make_model: torch {torch.__version__}, transformers {transformers.__version__}")

    raw_tok = build_tokenizer(outdir)
    ids = {s: raw_tok.token_to_id(s) for s in SPECIALS}
    config = Qwen2Config.from_dict(dict(MODEL_CONFIG, vocab_size=raw_tok.get_vocab_size(), bos_token_id=ids[PAD],
                                        eos_token_id=ids[EOS], pad_token_id=ids[PAD]))
    config.save_pretrained(outdir)   # first: AutoTokenizer picks its class by model_type, as in SGLang
    hf_tok = AutoTokenizer.from_pretrained(outdir, clean_up_tokenization_spaces=False)
    log(f"tokenizer: byte-level BPE, {raw_tok.get_vocab_size()} tokens, trained on {len(corpus_texts())} "
        f"fixed texts; specials {ids}; loads as {type(hf_tok).__name__}")
    examples = training_examples(hf_tok)
    if not same_ids_everywhere(raw_tok, hf_tok, examples):
        return 1
    for name, prompt, answer in examples[:len(SMOKE)]:
        log(f"  {name:10s} prompt {len(prompt):2d} tokens + answer {len(answer):2d} tokens: "
            f"{hf_tok.decode(prompt + answer, skip_special_tokens=False)!r}")

    model = Qwen2ForCausalLM(config).float()
    log(f"model: Qwen2ForCausalLM, {sum(p.numel() for p in model.parameters())} parameters; "
        f"{STEPS} AdamW steps (seed {SEED}) on {len(examples)} sequences")
    train(model, examples, ids[PAD])

    log("greedy check (temperature 0):")
    ok = check(model, examples, hf_tok, "float32")
    model = model.to(torch.bfloat16)
    ok = check(model, examples, hf_tok, "bfloat16") and ok
    if not ok:
        log("make_model: FAILED: the trained model does not give the smoke answers")
        return 1
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=ids[PAD], eos_token_id=ids[EOS], pad_token_id=ids[PAD], max_new_tokens=32)
    model.save_pretrained(outdir)   # safetensors, bfloat16, config.json with "dtype": "bfloat16"
    return 0


def main(argv=None):
    """Build in a scratch folder beside OUTDIR, then move exactly FILES into OUTDIR."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("outdir", help="folder to create (must not exist, or be empty)")
    args = ap.parse_args(argv)
    t0 = time.time()
    outdir = os.path.abspath(args.outdir)
    if os.path.isdir(outdir) and os.listdir(outdir):
        log(f"make_model: {outdir} exists and is not empty")
        return 2
    os.makedirs(os.path.dirname(outdir), exist_ok=True)
    work = tempfile.mkdtemp(prefix=".make_model-", dir=os.path.dirname(outdir))
    try:
        rc = build(work)
        if rc == 0:
            os.makedirs(outdir, exist_ok=True)
            for name in FILES:   # save_pretrained may add files of its own: not these
                path = os.path.join(outdir, name)
                os.replace(os.path.join(work, name), path)
                os.chmod(path, 0o644)   # safetensors writes 0600; the server may run as another user
                log(f"  wrote {path} ({os.path.getsize(path)} bytes)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"make_model: {'done' if rc == 0 else 'nothing written'} in {time.time() - t0:.1f} s wall; "
        f"{time.process_time():.1f} s CPU in all, imports included")
    return rc


if __name__ == "__main__":
    sys.exit(main())
