"""sglang/srt/environ.py of 0.5.23 as far as the fake needs it: at its import in every SGLang process (the main
one, and each scheduler and the detokenizer, which the real server spawns and which import it again), the legacy
SGL_ prefix of an environment variable is rewritten to SGLANG_ with Python's warning (environ.py:2294-2305, run at
2339). The warning's text and call layout are the real ones, so that Python prints the same two lines."""
import os
import warnings


def _handle_deprecated_envs():
    # Rewrite the legacy SGL_ prefix to SGLANG_ (names not covered above).
    for key, value in list(os.environ.items()):
        if key.startswith("SGL_"):
            new_key = key.replace("SGL_", "SGLANG_", 1)
            warnings.warn(
                f"Environment variable {key} is deprecated, please use {new_key}"
            )
            os.environ[new_key] = value


def in_child() -> None:
    """The fake forks its children: the import a spawned child runs afresh, with the warnings a fresh interpreter
    has not shown yet."""
    globals().pop("__warningregistry__", None)
    _handle_deprecated_envs()


_handle_deprecated_envs()
