// The k-blocked float panels shared by the AVX-512 and AVX2 sets (matmul_avx512.cc,
// matmul_avx2.cc), for kBlockedMinM ... kBlockedMaxM input rows (batched decode).
//
// The row tiles (matmul_internal.h's MatmulPanel / PackedRowsPanel) walk a whole row of k with a
// few x rows and 4 weight rows: at k = 4096 a 6 x 4 AVX-512 tile's operands are 160 KiB, so every
// step's loads come from L2, and each tile widens its 4 weight rows again (F16 at m = 16 on the
// Xeon: 164 GFLOP/s of ~440). Here x comes in blocks of kFloatBlockK columns (MakeFloatBlocks),
// the weights of kBlockRows rows are widened once into a per-thread buffer, and every tile of a
// chunk of x rows runs over a block with its accumulators kept in L1 between blocks. An
// element's operations are those of the row tiles: the same FMA chain per lane in increasing p
// (the accumulators are stored and reloaded exactly), the same zero-filled tail, the same
// reduction tree and bias.
//
// Like matmul_internal.h, everything here is a template over the TU's own types (Blk lives in an
// anonymous namespace), so no code compiled for one ISA is shared with another TU.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "kernels/cpu/matmul_internal.h"

namespace llm::kernels::internal {

constexpr int kBlockRows = 16;   // weight rows widened together (whole groups of kF16PackRows)
constexpr int kBlockedMinM = 6;  // below this the row tiles (kernel_bench matmul)
// Above this the row tiles again: prefill 512 (TinyLlama F16, AVX-512, 2 threads, alternating
// runs) gave 95.2 / 97.8 tok/s on them against 92.7 / 98.4 with the blocks (each panel streams
// all the x chunks from L3 either way), so the proven tiles keep prefill; m = 16 ... 128 gain.
constexpr int kBlockedMaxM = 128;
// Whether a panel of m input rows gets x as float blocks (matmul.cc chooses by the set's bounds,
// float_blocks_min_m / float_blocks_max_m, which the sets take from here).
constexpr bool Blocked(int m) {
  return m >= kBlockedMinM && m <= kBlockedMaxM;
}
static_assert(kFloatBlockK % 16 == 0 && kBlockRows % kF16PackRows == 0, "whole steps, groups");

// The widened weights of a thread's panel: kBlockRows rows of ldw floats (64-byte aligned; grown
// with the C allocator: no inline library function).
template <class Blk>
struct WidenedRows {
  // Rows one cache line longer than whole blocks: at k a multiple of 1024 the rows were a
  // multiple of 4 KiB apart, so a widening tile's 4 stores a step and the loads after them shared
  // their low 12 address bits (false store-to-load dependencies) and L1 sets. F16, m = 16,
  // k = 4096, 1 thread, AMD Zen 4 (2 Dec 2026), FMAs a cycle: weights in L2 0.66-0.68 -> 0.70-0.76,
  // from DRAM 0.58-0.62 -> 0.70-0.71; m = 6 (the widening tile alone) 0.46 -> 0.70; 2 threads,
  // four alternating pairs, n = 1024: 134-150 -> 150-183 GFLOP/s. Layout only: the same bits.
  static constexpr int64_t kRowPad = 16;
  float* w = nullptr;
  int64_t ldw = 0;
  ~WidenedRows() { std::free(w); }
  // Room for rows of k weights rounded up to whole blocks; false when out of memory.
  bool Reserve(int k) {
    const int64_t need = (static_cast<int64_t>(k) + kFloatBlockK - 1) / kFloatBlockK * kFloatBlockK;
    if (need + kRowPad <= ldw) return true;
    std::free(w);
    w = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * kBlockRows * (need + kRowPad)));
    ldw = w != nullptr ? need + kRowPad : 0;
    return w != nullptr;
  }
};

// Accumulator (i, j) of a tile whose first one is at acc: rows of kBlockRows accumulators of
// `lanes` floats.
template <int kLanes>
inline float* BlockedAcc(float* acc, int i, int j) {
  return acc + (i * kBlockRows + j) * kLanes;
}

// Which of a tile's steps fetch which weights into L2 ahead of the row group's widening tile, one
// step (kLanes weights of each row) at a time. Spread: at its steps p = at, at + stride, ...,
// weights q, q + kLanes, ... of the rows ahead; otherwise at its steps p in [at, end), weights
// q + p. A tile that fetches nothing has at = -1.
struct PrefetchSteps {
  int at = -1, stride = 0, end = 0, q = 0;
  bool spread = false;
};

// Tile t's share of fetching the `steps` steps of a block, split over `tiles` tiles of `steps`
// steps each (none when tiles is 0), with q relative to the block's first weight.
// Blk::kSpreadPrefetch spreads them evenly over all the tiles' steps (tile t takes its steps s
// with (t * steps + s) % tiles == 0): on the AVX-512 Xeon a software prefetch holds a fill buffer
// until DRAM answers, and a run of them (each tile its third of the block, step after step) left
// the tiles' own loads waiting (F16 packed, m = 16, k = 2048, n = 5632, weights from DRAM, 2
// threads: 141-153 -> 152-171 GFLOP/s; TinyLlama F16 decode b16 +7-15%). Otherwise tile t takes
// the t-th run of steps: the AVX2 set's 3 x 4 tiles ran 6-11% slower with the spread's counter in
// their step, and on AMD Zen 4 the AVX-512 tiles run a little faster with the runs too
// (g_prefetch.blocked_spread false there; F16 packed, m = 16, k = 4096, n = 4096 from DRAM, both
// in one process, alternating calls: 1 thread 66.0 -> 72.7 GFLOP/s, 2 threads 123.8-124.8 ->
// 127.4-128.5; n = 1024 alike).
template <class Blk>
PrefetchSteps PrefetchShare(int t, int tiles, int steps) {
  constexpr int kLanes = Blk::kLanes;
  if (tiles == 0) return {};
  if (Blk::kSpreadPrefetch && g_prefetch.blocked_spread) {
    const int first = t * steps, s0 = (tiles - first % tiles) % tiles;
    return {s0 * kLanes, tiles * kLanes, 0, (first + s0) / tiles * kLanes, true};
  } else {
    return {steps * t / tiles * kLanes, 0, steps * (t + 1) / tiles * kLanes, 0};
  }
}

// Tile MR x NR over `steps` kLanes-weight steps of the block from weight p0: accumulators from
// acc and back, x rows kFloatBlockK floats apart, weights from w (row j at w + j * ldw, whole
// rows: the block's weights at w + p0). x and w are zero past k, so a row's tail is one more
// step, as the row tiles zero-fill theirs. With kWiden (the panel's first tile of a row group)
// it widens the weights from src (the Rows view whose row j is the tile's row j) as it goes and
// leaves them in w for the others, so the weight stream overlaps its FMAs. pf says which of its
// steps fetch which weights ahead into L2 (PrefetchShare): shared by all the group's tiles of the
// first chunk, the weights stream from DRAM at an even rate (from the widening tile alone the
// prefetches waited on each other's fill buffers; TinyLlama F16 decode b16 on the AVX-512 Xeon
// 76-77 -> 79-80 tok/s).
template <class Blk, int MR, int NR, bool kWiden, class Rows>
void BlockedTile(const float* x, float* w, int64_t ldw, int steps, float* acc, const Rows src,
                 int p0, int k, const Rows ahead, const PrefetchSteps pf) {
  constexpr int kLanes = Blk::kLanes;
  using V = typename Blk::V;
  // whole steps inside the row (the widening tile takes the tail step with WidenTail)
  const int whole = !kWiden || (k - p0) / kLanes >= steps ? steps : (k - p0) / kLanes;
  // Every index below is a constant before GCC's scalar replacement runs (a pack expansion, not a
  // loop that is unrolled later), so the accumulators live in registers only: with loops GCC kept
  // a stack copy of them and spent a store and a load per accumulator and call on it.
  [ x, w, ldw, acc, src, p0, k, steps, whole, ahead,
    pf ]<int... A>(std::integer_sequence<int, A...>) {
    V a[MR * NR];
    int pf_at = pf.at, pf_q = pf.q;  // the next step that fetches, and what
    ((a[A] = Blk::Load(BlockedAcc<kLanes>(acc, A / NR, A % NR))), ...);
    const auto step = [&]<int... J>(std::integer_sequence<int, J...>, int p, bool tail)
        __attribute__((always_inline)) {
      V wv[NR];
      float* const wp = w + p0 + p;
      if (Blk::kSpreadPrefetch && pf.spread) {
        if (p == pf_at) {
          ahead.PrefetchL2(NR, pf_q);
          pf_at += pf.stride;
          pf_q += kLanes;
        }
      } else if (p >= pf.at && p < pf.end) {
        ahead.PrefetchL2(NR, pf.q + p);
      }
      if constexpr (kWiden) {
        if (tail) {
          ((wv[J] = Blk::WidenTail(src, J, p0 + p, k)), ...);
        } else {
          ((wv[J] = Blk::Widen(src, J, p0 + p)), ...);
        }
        ((Blk::Store(wp + J * ldw, wv[J])), ...);
      } else {
        ((wv[J] = Blk::Load(wp + J * ldw)), ...);
      }
      ((a[A] = Blk::Fma(Blk::Load(x + (A / NR) * kFloatBlockK + p), wv[A % NR], a[A])), ...);
    };
    for (int p = 0; p < whole * kLanes; p += kLanes) {
      step(std::make_integer_sequence<int, NR>{}, p, false);
    }
    if (whole < steps) step(std::make_integer_sequence<int, NR>{}, whole * kLanes, true);
    ((Blk::Store(BlockedAcc<kLanes>(acc, A / NR, A % NR), a[A])), ...);
  }
  (std::make_integer_sequence<int, MR * NR>{});
}

// Dispatches a tile of mr x nr (mr <= MR, nr <= NR) to BlockedTile<Blk, mr, nr, kWiden>.
template <class Blk, int MR, int NR, bool kWiden, class Rows>
void BlockedTileOf(int mr, int nr, const float* x, float* w, int64_t ldw, int steps, float* acc,
                   const Rows& src, int p0, int k, const Rows& ahead, const PrefetchSteps& pf) {
  if constexpr (MR > 1) {
    if (mr < MR) {
      return BlockedTileOf<Blk, MR - 1, NR, kWiden>(mr, nr, x, w, ldw, steps, acc, src, p0, k,
                                                    ahead, pf);
    }
  }
  if constexpr (NR > 1) {
    if (nr < NR) {
      return BlockedTileOf<Blk, MR, NR - 1, kWiden>(mr, nr, x, w, ldw, steps, acc, src, p0, k,
                                                    ahead, pf);
    }
  }
  BlockedTile<Blk, MR, NR, kWiden>(x, w, ldw, steps, acc, src, p0, k, ahead, pf);
}

// y[0:m, n0:n1] from x in float blocks (MakeFloatBlocks), with rows_of(j) the Rows view of the
// TU (its RowMajorRows, PackedRows16) whose row i is weight row j + i, for j = n0, n0 + 4, ...
//
// Blk (the ISA's vector operations; all aligned):
//   kLanes (floats per vector V), kMR x kNR (the tile);
//   Load(const float*) -> V, Store(float*, V), Fma(x, w, acc) -> V (x * w + acc, one rounding);
//   Widen(src, j, p) -> V: row j's kLanes weights from weight p of the matrix, as floats;
//   WidenTail(src, j, p, k) -> V: row j's weights p .. k - 1 (the row's tail), zero after;
//   Zero(acc) and Reduce(acc) -> float: one accumulator, zeroed / summed by the row tiles' tree.
template <class Blk, class RowsOf>
void BlockedPanel(const float* x, int m, int k, int n0, int n1, const float* bias, float* y,
                  int ldy, const RowsOf& rows_of) {
  constexpr int kLanes = Blk::kLanes, kMR = Blk::kMR, kNR = Blk::kNR;
  constexpr int kChunk = kFloatBlockRows;
  static_assert(kChunk % kMR == 0 && kFloatBlockK % kLanes == 0, "whole tiles and steps");
  struct Scratch {
    alignas(64) float acc[kChunk][kBlockRows][kLanes];  // lane sums between blocks
    WidenedRows<Blk> rows;
  };
  static thread_local Scratch s;
  if (!s.rows.Reserve(k)) {  // 64 KiB per 1024 of k: as a std::vector would, give up
    std::fprintf(stderr, "matmul: out of memory for %d widened weight rows of %d\n", kBlockRows, k);
    std::abort();
  }
  const int64_t ldw = s.rows.ldw;
  const int blocks = (k + kFloatBlockK - 1) / kFloatBlockK;
  for (int r0 = n0; r0 < n1; r0 += kBlockRows) {
    const int r1 = n1 - r0 < kBlockRows ? n1 : r0 + kBlockRows;
    for (int c0 = 0; c0 < m; c0 += kChunk) {
      const int c1 = m - c0 < kChunk ? m : c0 + kChunk;
      for (int i = 0; i < c1 - c0; ++i) {
        for (int j = 0; j < r1 - r0; ++j) Blk::Zero(s.acc[i][j]);
      }
      for (int p0 = 0; p0 < k; p0 += kFloatBlockK) {
        const int steps = ((k - p0 < kFloatBlockK ? k - p0 : kFloatBlockK) + kLanes - 1) / kLanes;
        const float* xb = x + (static_cast<int64_t>(c0 / kChunk) * blocks + p0 / kFloatBlockK) *
                                  kChunk * kFloatBlockK;
        // each tile's share of the prefetch (the same for every row group: divisions once)
        PrefetchSteps shares[kChunk / kMR];
        const int tiles = c0 == 0 ? (c1 - c0 + kMR - 1) / kMR : 0;
        for (int t = 0; t < tiles; ++t) shares[t] = PrefetchShare<Blk>(t, tiles, steps);
        for (int j = r0; j < r1; j += kNR) {
          const int nr = r1 - j < kNR ? r1 - j : kNR;
          float* const w = s.rows.w + (j - r0) * ldw;
          // The first chunk's tiles of the group fetch into L2 its next block, or after its last
          // block the same group of the next panel (a thread takes its panels in runs:
          // panel_schedule.h; past the matrix's last row that is a hint that nothing reads).
          const bool last = p0 + kFloatBlockK >= k;
          const auto ahead = rows_of(last ? j + kBlockRows : j);
          const int ahead_p = last ? 0 : p0 + kFloatBlockK;
          for (int i = c0; i < c1; i += kMR) {
            const int mr = c1 - i < kMR ? c1 - i : kMR;
            float* const acc = s.acc[i - c0][j - r0];
            PrefetchSteps pf;
            if (tiles > 0) {
              pf = shares[(i - c0) / kMR];
              pf.q += ahead_p;
            }
            const float* xi = xb + static_cast<int64_t>(i - c0) * kFloatBlockK;
            if (i == 0) {  // the panel's first tile of the row group widens its weights
              BlockedTileOf<Blk, kMR, kNR, true>(mr, nr, xi, w, ldw, steps, acc, rows_of(j), p0, k,
                                                 ahead, pf);
            } else {
              BlockedTileOf<Blk, kMR, kNR, false>(mr, nr, xi, w, ldw, steps, acc, rows_of(j), p0, k,
                                                  ahead, pf);
            }
          }
        }
      }
      for (int i = c0; i < c1; ++i) {
        float* const yi = y + static_cast<int64_t>(i) * ldy;
        for (int j = r0; j < r1; ++j) {
          const float sum = Blk::Reduce(s.acc[i - c0][j - r0]);
          yi[j] = bias != nullptr ? sum + bias[j] : sum;
        }
      }
    }
  }
}

// A set's float panels: its row tiles (RowTiles) outside Blocked(m), else BlockedPanel on the
// matrix's rows. Blk also names W (the weight type) and the TU's two views of weight rows:
// RowMajor(w, k) (row i at w + i * k) and Packed(group, r, k) (a kF16Packed group of r rows).
template <class Blk, MatmulPanelFn RowTiles>
void BlockedRowMajorPanel(const float* x, int m, int k, const void* wv, int n0, int n1,
                          const float* bias, float* y, int ldy) {
  if (!Blocked(m)) return RowTiles(x, m, k, wv, n0, n1, bias, y, ldy);
  const auto* w = static_cast<const typename Blk::W*>(wv);
  BlockedPanel<Blk>(x, m, k, n0, n1, bias, y, ldy,
                    [w, k](int j) { return Blk::RowMajor(w + static_cast<int64_t>(j) * k, k); });
}
// The same for packed F16 / BF16 rows (groups of 4, f16_packed.h; n0 a multiple of 4).
template <class Blk, MatmulPanelFn RowTiles>
void BlockedPackedPanel(const float* x, int m, int k, const void* wv, int n0, int n1,
                        const float* bias, float* y, int ldy) {
  if (!Blocked(m)) return RowTiles(x, m, k, wv, n0, n1, bias, y, ldy);
  const auto* w = static_cast<const uint16_t*>(wv);
  BlockedPanel<Blk>(x, m, k, n0, n1, bias, y, ldy, [w, k, n1](int g) {
    return Blk::Packed(w + static_cast<int64_t>(g) * k,
                       g < n1 && n1 - g < kF16PackRows ? n1 - g : kF16PackRows, k);
  });
}

}  // namespace llm::kernels::internal
