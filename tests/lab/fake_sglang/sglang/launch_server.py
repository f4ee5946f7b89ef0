"""``python -m sglang.launch_server --model-path PATH [flags]`` (fake)."""
import sys

if __name__ == "__main__":
    from sglang._fake.main import main

    main(sys.argv[1:])
