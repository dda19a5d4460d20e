"""The command-line options the benchmark scripts share."""

import argparse


def benchmark_parser(doc, **defaults):
    """An ArgumentParser whose description is ``doc``'s first line, with one
    integer option per keyword (``head_dim=4`` gives ``--head-dim 4``); a list
    default makes an option that takes several integers."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    for name, default in defaults.items():
        nargs = "+" if isinstance(default, list) else None
        parser.add_argument(
            "--" + name.replace("_", "-"), type=int, nargs=nargs, default=default
        )
    return parser
