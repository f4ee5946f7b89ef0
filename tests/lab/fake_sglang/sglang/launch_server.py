"""``python -m sglang.launch_server --model-path PATH [flags]`` (fake)."""
import sys
import warnings

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
