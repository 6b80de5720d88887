#!/usr/bin/env python3
"""Where the GPU time of each forward step goes, from an Nsight Compute CSV.

    ncu --clock-control none --metrics gpu__time_duration.sum --csv \\
        build/tools/llm-bench --device cuda ... > prof.csv
    tools/ncu-steps.py prof.csv            # every step
    tools/ncu-steps.py prof.csv --last 3   # the last 3 (the decode steps of a short run)

A step starts at the embedding lookup (EmbeddingKernel, the first kernel of every forward pass
of the CUDA backend). Per step: the kernel count, the summed kernel time, the attention grid
(rows, heads, partitions) and the time per kind of kernel (gemm, attention, convert, norm, rope,
cache, other). ncu runs kernels one at a time, so the sum is the GPU's busy time without
overlap; a step's wall time beyond it is the host's (compare llm-bench's "a step ... ms").
Only the standard library: runs with the python3 of a GPU image.
"""
import argparse
import csv
import io
import re
import sys

KINDS = [
    ("attention", re.compile(r"PagedAttention|MergePartitions")),
    ("gemm", re.compile(r"nvjet|gemm|Gemm|splitK|cutlass|cublas", re.I)),
    ("convert", re.compile(r"ConvertKernel")),
    ("norm", re.compile(r"RmsNorm")),
    ("rope", re.compile(r"RopeKernel")),
    ("cache", re.compile(r"ReshapeAndCache")),
]
STEP_START = re.compile(r"EmbeddingKernel")
UNIT_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}


def kind_of(name):
    for kind, pattern in KINDS:
        if pattern.search(name):
            return kind
    return "other"


def read_kernels(text):
    """Kernels in launch order: dicts of name, grid and ns (gpu__time_duration.sum)."""
    lines = text.splitlines()
    header = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if header is None:
        raise ValueError("no ncu CSV header (a line starting with \"ID\"): was --csv given?")
    kernels = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[header:]))):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = row.get("Metric Unit", "ns")
        if unit not in UNIT_NS:
            raise ValueError(f"unknown time unit '{unit}' of kernel {row.get('ID')}")
        value = float(row["Metric Value"].replace(",", "")) * UNIT_NS[unit]
        kernels[int(row["ID"])] = {"name": row["Kernel Name"], "grid": row.get("Grid Size", ""),
                                   "ns": value}
    if not kernels:
        raise ValueError("no gpu__time_duration.sum rows: profile with --metrics "
                         "gpu__time_duration.sum")
    return [kernels[i] for i in sorted(kernels)]


def split_steps(kernels):
    """Lists of kernels, one per step; kernels before the first embedding lookup are dropped."""
    steps = []
    for k in kernels:
        if STEP_START.search(k["name"]):
            steps.append([])
        if steps:
            steps[-1].append(k)
    return steps


def summarize(step):
    by_kind = {}
    for k in step:
        kind = kind_of(k["name"])
        by_kind[kind] = by_kind.get(kind, 0.0) + k["ns"]
    grid = next((k["grid"] for k in step if "PagedAttention" in k["name"]), "-")
    return {"kernels": len(step), "ns": sum(k["ns"] for k in step), "attention_grid": grid,
            "by_kind": by_kind}


def format_step(index, s):
    parts = ", ".join(f"{kind} {ns / 1e3:.0f}"
                      for kind, ns in sorted(s["by_kind"].items(), key=lambda kv: -kv[1]))
    return (f"step {index}: {s['kernels']} kernels, {s['ns'] / 1e3:.0f} us, attention grid "
            f"{s['attention_grid']}: {parts} (us)")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", help="ncu --csv output (stdout of the profiled program may be mixed in)")
    ap.add_argument("--last", type=int, default=0, help="only the last N steps (0: all)")
    args = ap.parse_args(argv)
    if args.last < 0:
        ap.error("--last must be >= 0")
    try:
        with open(args.csv, encoding="utf-8", errors="replace") as f:
            steps = split_steps(read_kernels(f.read()))
    except (OSError, ValueError) as e:
        print(f"ncu-steps: {e}", file=sys.stderr)
        return 2
    if not steps:
        print("ncu-steps: no step (no EmbeddingKernel in the profile)", file=sys.stderr)
        return 2
    first = len(steps) - args.last if 0 < args.last < len(steps) else 0
    for i in range(first, len(steps)):
        print(format_step(i, summarize(steps[i])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
