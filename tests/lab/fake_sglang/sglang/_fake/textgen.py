"""What the fake model says: known answers, plausible filler, garbage, random (dummy weights).

An answer is a list of token strings plus whether it ends naturally (EOS) after them.
"""
from __future__ import annotations

import hashlib
import random
import re
from typing import Iterator, List, Optional, Tuple

VOCAB = 151936
EOS_ID = 151645            # <|im_end|> of Qwen-style vocabularies
_TOKEN_RE = re.compile(r" ?[A-Za-z]+|\s?\d|[^\sA-Za-z\d]|\s+")
_ID_CACHE: dict = {"!": 0, "+": 10, "0": 15}

FILLER = [
    "The system processes each request in a batch so that the GPU stays busy.",
    "In practice, the answer depends on the size of the model and the length of the prompt.",
    "Many teams measure throughput and latency before they choose a configuration.",
    "A careful engineer writes down what was tried, what failed and why.",
    "This makes the next deployment faster and easier to trust.",
    "The weather in the valley was mild, and the river ran slowly past the old mill.",
    "Good documentation explains not only how a tool works but also when to use it.",
    "When the cache is warm, repeated prompts are answered much more quickly.",
    "Each layer of the network transforms the hidden state a little further.",
    "There are several ways to approach this problem, and each has its own trade-offs.",
    "First, it helps to state the question clearly and to list the known facts.",
    "Then one can compare the options and pick the simplest one that works.",
]
JUNK = ["ilerdeği", " Rud", "ocado", " 省", "_SUB", " Kub", "ρα", " ){\n", "agnet", " blah", "ுக", " ingen",
        "ToSelector", " Portug", "\u200b", " assertTrue", "ASY", " Ра", "izzare", ".visit", " Wend", "ήσ"]


def tokenize(text: str) -> List[str]:
    return _TOKEN_RE.findall(text)


def count_tokens(text: str) -> int:
    return max(1, len(tokenize(text)))


def token_id(tok: str) -> int:
    i = _ID_CACHE.get(tok)
    if i is None:
        h = int.from_bytes(hashlib.blake2b(tok.encode("utf-8"), digest_size=4).digest(), "big")
        i = 100 + h % (VOCAB - 2000)
        if len(_ID_CACHE) < 200000:
            _ID_CACHE[tok] = i
    return i


def _arith(prompt: str) -> Optional[str]:
    m = None
    for m in re.finditer(r"(-?\d+(?:\.\d+)?)\s*([+\-*/x×])\s*(-?\d+(?:\.\d+)?)", prompt):
        pass                                            # the last expression in the prompt
    if not m:
        return None
    a, op, b = float(m.group(1)), m.group(2), float(m.group(3))
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op in "*x×":
        r = a * b
    else:
        if b == 0:
            return None
        r = a / b
    rs = str(int(r)) if float(r).is_integer() else f"{r:.4g}"
    return rs, f"{m.group(1)} {op} {m.group(3)}"  # type: ignore[return-value]


def known_answer(prompt: str, chat: bool) -> Optional[Tuple[str, bool]]:
    """(text, ends) for the prompts the lab checks; None for anything else."""
    p = prompt.lower()
    if "capital city of france" in p or "capital of france" in p:
        if chat:
            return "The capital of France is Paris.", True
        return (" Paris. It is the largest city in France and one of the most visited cities in the world, "
                "known for the Eiffel Tower and the Louvre."), True
    ar = _arith(prompt)
    if ar is not None:
        res, expr = ar  # type: ignore[misc]
        if chat:
            return f"{expr} = {res}.", True
        if prompt.rstrip().endswith("="):
            return f" {res}", True
        return f" {res}.", True
    if chat and re.search(r"\b(say hello|hello|hi)\b", p):
        return "Hello! How can I help you today?", True
    return None


def _seed(prompt: str, salt: str = "") -> int:
    return int.from_bytes(hashlib.blake2b((salt + prompt).encode("utf-8"), digest_size=8).digest(), "big")


def filler_tokens(rng: random.Random) -> Iterator[str]:
    first = True
    while True:
        s = rng.choice(FILLER)
        yield from tokenize(s if first else " " + s)
        first = False


class Answer:
    """Token source for one request: tokens[i] for i < limit, then EOS if `ends`."""

    __slots__ = ("_toks", "_gen", "ends_at")

    def __init__(self, base: List[str], ends: bool, tail: Optional[Iterator[str]]):
        self._toks = base
        self._gen = tail
        self.ends_at = len(base) if ends else None

    def token(self, i: int) -> str:
        toks = self._toks
        while i >= len(toks):
            if self._gen is None:
                return "!"
            toks.append(next(self._gen))
        return toks[i]


def make_answer(prompt: str, *, chat: bool, temperature: float, mode: str, ignore_eos: bool,
                garbage_text: str = "!") -> Answer:
    """mode: ok | garbage | random (dummy weights) | nan (token 0 "!")"""
    if mode == "garbage":
        return Answer([], False, _repeat(garbage_text))
    if mode == "nan":
        return Answer([], False, _repeat("!"))
    greedy = not temperature or temperature <= 1e-5
    rng = random.Random(_seed(prompt) if greedy else None)
    if mode == "random":
        return Answer([], False, _junk(rng))
    ka = known_answer(prompt, chat)
    if ka is not None:
        text, ends = ka
        toks = tokenize(text)
        if ignore_eos:
            return Answer(toks, False, filler_tokens(rng))
        return Answer(toks, ends, None)
    # plausible filler that ends after a seeded number of sentences
    n_sent = rng.randint(3, 9)
    toks: List[str] = []
    gen = filler_tokens(rng)
    while n_sent > 0:
        t = next(gen)
        toks.append(t)
        if t == ".":
            n_sent -= 1
    if ignore_eos:
        return Answer(toks, False, gen)
    return Answer(toks, True, None)


def _repeat(t: str) -> Iterator[str]:
    while True:
        yield t


def _junk(rng: random.Random) -> Iterator[str]:
    while True:
        yield rng.choice(JUNK)
