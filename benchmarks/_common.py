"""What the benchmark scripts share: command-line options and the CPU line."""

import argparse
import os
import platform
import subprocess


def benchmark_parser(doc, **defaults):
    """An ArgumentParser whose description is ``doc``'s first line, with one
    integer option per keyword (``head_dim=4`` gives ``--head-dim 4``); a list
    default makes an option that takes several integers (none skips it)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    for name, default in defaults.items():
        nargs = "*" if isinstance(default, list) else None
        parser.add_argument(
            "--" + name.replace("_", "-"), type=int, nargs=nargs, default=default
        )
    return parser


def cpu_line():
    """The CPU's model name and its widest vector extension."""
    name = platform.processor() or "unknown CPU"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                name = line.split(":", 1)[1].strip()
        flags = out.split("Flags:", 1)[-1]
        vector = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else ""
    except OSError:
        vector = ""
    return f"CPU: {name}, {os.cpu_count()} cores {vector}".rstrip()
