"""The arguments of the server (fake): ``ServerArgs.add_cli_args(parser)`` rebuilt from the dump of the
real parser (``server-args-<version>.json``), so argparse accepts, rejects and abbreviates exactly the same
flags as the played release.

Table lookup: env ``FAKE_SGLANG_ARGS_TABLE`` (a path), else ``sglang/_fake/data/server-args-<ver>.json`` (a table
dropped in for another release), else ``<checkout>/tests/data/sglang/server-args-<ver>.json``: the dumps the
collection's unit tests read, one file for both (the lab's hosts see the checkout at the same path).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
from typing import Any, Dict, List, Optional

from sglang.version import __version__

_HERE = os.path.dirname(os.path.abspath(__file__))
_PKG_DATA = os.path.join(os.path.dirname(_HERE), "_fake", "data")
_REPO_DATA = os.path.normpath(os.path.join(_HERE, "..", "..", "..", "..", "data", "sglang"))


# --- the argument types the real parser uses (same __name__, argparse prints it in errors) ---------
def nullable_str(val: str):
    if not val or val == "None":
        return None
    return val


def human_readable_int(value: str) -> int:
    """'32768', '128k' (SI), '128Ki' (IEC)."""
    value = value.strip()
    si = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if m:
        number, suffix = m.groups()
        if suffix in iec:
            if "." in number:
                raise ValueError(f"Decimals are not allowed with IEC suffixes: {value}")
            return int(number) * iec[suffix]
        return int(float(number) * si[suffix])
    return int(value)


def json_list_type(value):
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"Invalid JSON list: {value}. Please provide a valid JSON list.") from e


def parse_cuda_graph_backend_arg(value: str) -> str:
    v = value.strip().lower()
    if v in ("true", "1", "yes", "on"):
        return "full"
    if v in ("false", "0", "no", "off"):
        return "disabled"
    return v


def parse_cuda_graph_config_arg(value: str):
    value = value.strip()
    if value.startswith("{"):
        return json.loads(value)
    return value


_TYPES = {
    "str": str, "int": int, "float": float, "loads": json.loads, "nullable_str": nullable_str,
    "human_readable_int": human_readable_int, "json_list_type": json_list_type,
    "parse_cuda_graph_backend_arg": parse_cuda_graph_backend_arg,
    "parse_cuda_graph_config_arg": parse_cuda_graph_config_arg,
}


def table_path(version: str | None = None) -> str:
    env = os.environ.get("FAKE_SGLANG_ARGS_TABLE", "").strip()
    if env:
        return env
    version = version or __version__
    name = f"server-args-{version}.json"
    for d in (_PKG_DATA, _REPO_DATA):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(
        f"fake sglang: no argument table for version {version} ({name} not in {_PKG_DATA} or {_REPO_DATA}); "
        "set FAKE_SGLANG_ARGS_TABLE")


_TABLE_CACHE: Dict[str, dict] = {}


def load_table(version: str | None = None) -> dict:
    p = table_path(version)
    if p not in _TABLE_CACHE:
        with open(p, encoding="utf-8") as f:
            _TABLE_CACHE[p] = json.load(f)
    return _TABLE_CACHE[p]


def _is_boolean_optional(flags: List[str]) -> bool:
    return len(flags) == 2 and flags[1] == "--no-" + flags[0][2:]


def add_cli_args_from_table(parser: argparse.ArgumentParser, table: dict) -> None:
    seen_dests = set()
    for opt in table["options"]:
        flags, dest = list(opt["flags"]), opt["dest"]
        if dest == "help":
            continue                       # the parser brings its own -h/--help
        kw: Dict[str, Any] = {"dest": dest, "help": opt.get("help")}
        if dest in seen_dests:             # a deprecated alias sharing a dest: keep the first default
            kw["default"] = argparse.SUPPRESS
        else:
            kw["default"] = opt.get("default")
        seen_dests.add(dest)
        if opt.get("nargs") == 0 or not opt.get("takes_value", True):
            if _is_boolean_optional(flags):
                parser.add_argument(flags[0], action=argparse.BooleanOptionalAction, **kw)
            else:
                parser.add_argument(*flags, action="store_true", **kw)
            continue
        tname = opt.get("type")
        if tname is not None:
            if tname not in _TYPES:
                raise ValueError(f"fake sglang: unknown argument type {tname!r} for {flags[0]}")
            kw["type"] = _TYPES[tname]
        if opt.get("nargs") is not None:
            kw["nargs"] = opt["nargs"]
            if opt["nargs"] == "?":
                kw["const"] = ""
        if opt.get("choices") is not None:
            kw["choices"] = opt["choices"]
        if dest == "model_path":
            kw["required"] = True          # real sglang: required=True
        parser.add_argument(*flags, **kw)


class ServerArgs:
    """Attribute bag with the real class's entry points (add_cli_args, from_cli_args, url)."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)
        self.__post_init__()

    def __post_init__(self):
        if getattr(self, "served_model_name", None) is None:
            self.served_model_name = self.model_path
        if getattr(self, "tokenizer_path", None) is None:
            self.tokenizer_path = self.model_path
        self.check_server_args()

    def check_server_args(self):
        name = self.served_model_name or ""
        if not re.match(r"^(s3|gs|az)://", name):
            assert ":" not in name, (
                "served_model_name cannot contain a colon (':') character. "
                "The colon is reserved for the 'model:adapter' syntax used in LoRA adapter specification. "
                f"Invalid value: '{name}'"
            )
        tp = getattr(self, "tp_size", 1) or 1
        assert tp >= 1, "tp_size must be positive"
        nnodes = getattr(self, "nnodes", 1)
        if nnodes is not None:
            assert tp % nnodes == 0, "tp_size must be divisible by number of nodes"

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        add_cli_args_from_table(parser, load_table())

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> "ServerArgs":
        return cls(**vars(args))

    def url(self) -> str:
        host = self.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.__dict__)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"ServerArgs({inner})"


def prepare_server_args(argv: List[str]) -> ServerArgs:
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    raw_args = parser.parse_args(argv)
    return ServerArgs.from_cli_args(raw_args)


__all__ = ["ServerArgs", "prepare_server_args", "load_table", "table_path", "nullable_str",
           "human_readable_int", "json_list_type", "dataclasses", "Optional"]
