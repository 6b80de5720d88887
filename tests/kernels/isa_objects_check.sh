#!/usr/bin/env bash
# The translation units compiled with ISA flags (-mavx2, -mavx512*, -mamx-*: their names hold
# avx2, avx512 or amx) must define no weak (COMDAT) symbol: the linker keeps one copy of an
# inline function or template member for the whole program, and if it kept one compiled with
# AVX-512 a CPU without it would fault wherever another TU calls it (matmul_internal.h). Such a
# TU uses its own types instead (std::vector of a struct of its anonymous namespace).
# Usage: isa_objects_check.sh path/to/libllm_kernels.a
set -euo pipefail
lib=$1
command -v nm >/dev/null || { echo "SKIPPED: nm (binutils) not found"; exit 77; }
# nm -A prefixes each line with archive:member:
weak=$(nm -A -C "$lib" | grep -E '^[^:]*:[^:]*(avx2|avx512|amx)[^:]*\.o: *[0-9a-f]* [WVu] ' |
  grep -v 'DW.ref.__gxx_personality_v0' || true)
lines=$(nm -A "$lib" 2>/dev/null | grep -cE '^[^:]*:[^:]*(avx2|avx512|amx)[^:]*\.o:' || true)
if [ "$lines" -eq 0 ]; then
  echo "FAIL: no object of $lib has avx2, avx512 or amx in its name (renamed?)"
  exit 1
fi
if [ -n "$weak" ]; then
  echo "FAIL: weak symbols in ISA-flagged objects:"
  echo "$weak"
  exit 1
fi
echo "ok: $lines symbols in ISA-flagged objects, none weak"
