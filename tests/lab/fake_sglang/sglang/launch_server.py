"""``python -m sglang.launch_server --model-path PATH [flags]`` (fake)."""
import sys
import warnings

# its import rewrites SGL_ variables to SGLANG_ with a warning each, as the real one's does, before the warning below
import sglang.srt.environ  # noqa: F401  pylint: disable=unused-import

if __name__ == "__main__":
    # sglang 0.5.23 launch_server.py:70-76, printed by Python's warnings module on stderr as the first lines
    warnings.warn(
        "'python -m sglang.launch_server' is still supported, but "
        "'sglang serve' is the recommended entrypoint.\n"
        "  Example: sglang serve --model-path <model> [options]",
        UserWarning,
        stacklevel=1,
    )
    from sglang._fake.main import main

    main(sys.argv[1:])
