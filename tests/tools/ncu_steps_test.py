#!/usr/bin/env python3
"""tools/ncu-steps.py on a small Nsight Compute CSV (tests/tools/data/ncu_sample.csv): kernels
before the first embedding lookup are dropped, a step starts at each EmbeddingKernel, times in
ns / us / ms with thousands separators are summed per kind, and bad input is exit status 2."""
import importlib.util
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
script = os.path.join(here, "..", "..", "tools", "ncu-steps.py")
sample = os.path.join(here, "data", "ncu_sample.csv")
spec = importlib.util.spec_from_file_location("ncu_steps", script)
ncu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ncu)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


with open(sample, encoding="utf-8") as f:
    kernels = ncu.read_kernels(f.read())
check(len(kernels) == 9, f"9 kernels, got {len(kernels)}")
steps = ncu.split_steps(kernels)
check(len(steps) == 2, f"2 steps, got {len(steps)}")
first = ncu.summarize(steps[0])
check(first["kernels"] == 6, f"step 0: 6 kernels, got {first['kernels']}")
check(abs(first["ns"] - 8900.0) < 1e-6, f"step 0: 8900 ns, got {first['ns']}")
check(first["by_kind"] == {"other": 1100.0, "gemm": 5000.0, "attention": 2500.0,
                           "convert": 300.0}, f"step 0 kinds: {first['by_kind']}")
check(first["attention_grid"] == "(2, 4, 3)", f"step 0 grid: {first['attention_grid']}")
second = ncu.summarize(steps[1])
check(abs(second["ns"] - 2400.0) < 1e-6, f"step 1: 2400 ns, got {second['ns']}")
check(abs(second["by_kind"].get("norm", 0) - 400.0) < 1e-6, f"step 1 norm: {second['by_kind']}")
check(second["attention_grid"] == "-", f"step 1 grid: {second['attention_grid']}")

run = subprocess.run([sys.executable, script, sample, "--last", "1"], capture_output=True,
                     text=True, check=False)
check(run.returncode == 0, f"--last 1: exit {run.returncode}: {run.stderr}")
check(run.stdout.startswith("step 1: 2 kernels, 2 us"), f"--last 1 printed: {run.stdout!r}")
check(run.stdout.count("\n") == 1, f"--last 1 printed one line: {run.stdout!r}")

with tempfile.TemporaryDirectory() as d:
    bad = os.path.join(d, "bad.csv")
    for text, why in [("no header here\n", "no ncu CSV header"),
                      ('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
                       '"0","EmbeddingKernel","gpu__time_duration.sum","hours","1"\n',
                       "unknown time unit")]:
        with open(bad, "w", encoding="utf-8") as f:
            f.write(text)
        run = subprocess.run([sys.executable, script, bad], capture_output=True, text=True,
                             check=False)
        check(run.returncode == 2 and why in run.stderr, f"{why}: exit {run.returncode} "
              f"{run.stderr!r}")
    run = subprocess.run([sys.executable, script, os.path.join(d, "missing.csv")],
                         capture_output=True, text=True, check=False)
    check(run.returncode == 2 and "ncu-steps:" in run.stderr, f"missing file: {run.stderr!r}")

for f in failures:
    print("FAIL:", f)
print("ncu_steps_test:", "FAILED" if failures else "ok")
sys.exit(1 if failures else 0)
