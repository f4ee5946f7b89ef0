"""Log lines in real sglang's format: ``[%Y-%m-%d %H:%M:%S<prefix>] message`` (prefix `` TP3`` in a
scheduler). Written straight to the file descriptor (unbuffered, one write per record so lines from the
forked ranks do not interleave). sglang logs to stderr; uvicorn's access log goes to stdout."""
from __future__ import annotations

import os
import time

PREFIX = ""          # set in a scheduler process: " TP0"


def stamp(prefix: str | None = None) -> str:
    p = PREFIX if prefix is None else prefix
    return time.strftime("[%Y-%m-%d %H:%M:%S", time.localtime()) + p + "] "


def _write(fd: int, data: str) -> None:
    b = data.encode("utf-8", "replace")
    while b:
        try:
            n = os.write(fd, b)
        except InterruptedError:
            continue
        except OSError:
            return
        b = b[n:]


def info(msg: str, prefix: str | None = None) -> None:
    """One record (may span lines, like a traceback)."""
    _write(2, stamp(prefix) + msg + "\n")


error = warning = info


def raw(text: str, fd: int = 2) -> None:
    """Unprefixed output (tqdm bars)."""
    _write(fd, text)


def uvicorn(msg: str, level: str = "INFO") -> None:
    """uvicorn's formatter as sglang configures it: ``[time] INFO:     message``."""
    _write(2, stamp("") + (level + ":").ljust(9) + " " + msg + "\n")


def access(client: str, method: str, path: str, status: int, phrase: str) -> None:
    _write(1, stamp("") + "INFO:     " + f'{client} - "{method} {path} HTTP/1.1" {status} {phrase}\n')
