// AVX-512 Matmul micro-kernel (compiled with -mavx512f -mavx512bw -mavx512vl -mfma -mf16c).
// One zmm accumulator (16 lanes) per output element; 16-bit weights are widened to f32 in
// registers (exact), so every path accumulates x * w in f32 with FMA. F16 and BF16 weights may
// also come in groups of 4 interleaved rows (kF16Packed, kBF16Packed: f16_packed.h), with the
// same bits. (The block formats, Q8_0 among them, are in matmul_quant_avx512.cc.)
// GCC 12 warns inside its own AVX-512 intrinsics (the `__Y = __Y` of _mm512_undefined_*, GCC bug
// 105593, fixed in GCC 13); nothing in this file reads an uninitialised value.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <utility>

#include "kernels/cpu/matmul_internal.h"

namespace llm::kernels::internal {
namespace {

struct F32Load {
  using W = float;
  static __m512 Load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 LoadTail(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};

struct F16Load {
  using W = uint16_t;
  static __m512 Widen(__m256i h) { return _mm512_cvtph_ps(h); }
  static __m512 Load(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 LoadTail(const uint16_t* p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
};

struct Bf16Load {
  using W = uint16_t;
  static __m512 Widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 Load(const uint16_t* p) {
    return Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 LoadTail(const uint16_t* p, __mmask16 m) {
    return Widen(_mm256_maskz_loadu_epi16(m, p));
  }
};

// Fixed reduction tree: 16 -> 8 -> 4 -> 2 -> 1 lanes, adding the upper half onto the lower.
inline float ReduceAdd(__m512 v) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

// Where a tile's weight rows are, as 16 widened lanes of row j from weight p (p + 16 <= k) or
// the rest of the row from p (zero past k).
template <class Loader>
struct RowMajorRows {  // the file's layout: row j at w + j * ld
  using W = typename Loader::W;
  const W* w;
  int64_t ld;
  __m512 Load(int j, int p) const { return Loader::Load(w + j * ld + p); }
  __m512 LoadTail(int j, int p, __mmask16 m) const { return Loader::LoadTail(w + j * ld + p, m); }
  // A GEMV row's software prefetch (g_prefetch.f16_gemv): one line per 2 steps.
  // A step's weights of rows [0, nr) from weight p, into L2.
  void PrefetchL2(int nr, int p) const {
    for (int j = 0; j < nr; ++j) __builtin_prefetch(w + j * ld + p, 0, 2);
  }
  void Prefetch(int nr, int p) const {
    if (g_prefetch.f16_gemv != 0 && (p & 31) == 0) {
      for (int j = 0; j < nr; ++j) {
        __builtin_prefetch(reinterpret_cast<const char*>(w + j * ld + p) + g_prefetch.f16_gemv, 0,
                           3);
      }
    }
  }
};

// One group of r rows of kF16Packed / kBF16Packed (f16_packed.h): 16 weights of a row are two
// of its 8-weight chunks.
template <class Loader>
struct PackedRows16 {
  const uint16_t* group;
  int r;
  int k;
  __m512 Load(int j, int p) const {
    const __m128i lo =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(group + F16PackedChunk(r, j, p)));
    const __m128i hi =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(group + F16PackedChunk(r, j, p + 8)));
    return Loader::Widen(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
  }
  __m512 LoadTail(int j, int p, __mmask16) const {  // the last k - p < 16 weights, zero after
    uint16_t buf[16] = {};
    const int k8 = k - k % kF16PackChunk;
    for (int q = p; q < k; ++q) {
      buf[q - p] = q < k8 ? group[F16PackedChunk(r, j, q - q % kF16PackChunk) + q % kF16PackChunk]
                          : group[F16PackedTail(r, j, k) + (q - k8)];
    }
    return Loader::Load(buf);
  }
  // One sequential stream: Intel's prefetchers leave it under DRAM speed, AMD's follow it
  // (g_prefetch.f16_packed: 0 there).
  void Prefetch(int, int p) const { PrefetchPackedStep(group, r, p, 16); }
  // A step's weights of the group (16 of each row, one run) from weight p, into L2.
  void PrefetchL2(int, int p) const {
    const auto* at = reinterpret_cast<const char*>(group + F16PackedChunk(r, 0, p));
    for (int b = 0; b < 32 * r; b += 64) __builtin_prefetch(at + b, 0, 2);
  }
};

// kRows: x rows per tile. The packed panels take 6 (6 x 4 accumulators + 4 weights + 1 x = 29 of
// the 32 zmm): each widened weight vector then feeds 6 FMAs instead of 4, and F16 prefill 512 on
// the Xeon went from 79-81 to 84-89 tok/s (alternating runs, 29 Nov 2026). The row-major panels
// keep 4 (their tile table, kTileFns, is 4 x 4). An element's operations never depend on the
// tile shape.
template <class Loader, int kRows = 4>
struct Avx512Micro {
  using W = typename Loader::W;
  static constexpr int kMR = kRows;
  static constexpr int kNR = 4;

  template <int MR, int NR>
  static void Tile(const float* x, int64_t ldx, const W* w, int64_t ldw, int k, const float* bias,
                   float* y, int64_t ldy) {
    TileOn<MR, NR>(x, ldx, RowMajorRows<Loader>{w, ldw}, k, bias, y, ldy);
  }

  // The same operations for every layout of the weight rows (RowMajorRows, PackedRows16).
  template <int MR, int NR, class Rows>
  static void TileOn(const float* x, int64_t ldx, const Rows& w, int k, const float* bias, float* y,
                     int64_t ldy) {
    __m512 acc[MR][NR];
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
    }
    int p = 0;
    for (; p + 16 <= k; p += 16) {
      __m512 wv[NR];
      if constexpr (MR == 1 && sizeof(W) == 2) w.Prefetch(NR, p);
      for (int j = 0; j < NR; ++j) wv[j] = w.Load(j, p);
      for (int i = 0; i < MR; ++i) {
        const __m512 xv = _mm512_loadu_ps(x + i * ldx + p);
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
      }
    }
    if (p < k) {  // zero-filled tail: lanes past k add 0 * 0
      const __mmask16 mask = static_cast<__mmask16>((1u << (k - p)) - 1);
      __m512 wv[NR];
      for (int j = 0; j < NR; ++j) wv[j] = w.LoadTail(j, p, mask);
      for (int i = 0; i < MR; ++i) {
        const __m512 xv = _mm512_maskz_loadu_ps(mask, x + i * ldx + p);
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
      }
    }
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) {
        const float s = ReduceAdd(acc[i][j]);
        y[i * ldy + j] = bias != nullptr ? s + bias[j] : s;
      }
    }
  }
};

// k-blocked panels for kBlockedMinM ... kBlockedMaxM input rows (batched decode). The tiles
// above walk a whole row of k with 6 (or 4) x rows and 4 weight rows: at k = 4096 that is 160 KiB
// of operands per tile, so every step's 10 loads come from L2, and each tile widens its 4 weight
// rows again (F16 at m = 16 on the Xeon: 164 GFLOP/s of ~440). Here x comes in blocks of kBlockK
// columns (MakeFloatBlocks), the weights of 16 rows are widened once into a per-thread buffer,
// and every tile of a chunk of x rows runs over a block with its accumulators kept in L1 between
// blocks. An element's operations are those of the tiles above: the same FMA chain per lane in
// increasing p (the accumulators are stored and reloaded exactly), the same zero-filled tail, the
// same reduction tree and bias. Block width: 512 against 128 / 256 / 1024 (2 threads, F16 packed,
// m = 16 and 64 at k = 2048 and 5632): 195-248 GFLOP/s against 167-189 / 174-201 / 163-233.
constexpr int kBlockK = kFloatBlockK;         // weights per block (a multiple of 16)
constexpr int kBlockRows = 16;                // weight rows widened together (whole groups of 4)
constexpr int kBlockMR = 6;                   // x rows per tile (6 x 4 accumulators + 4 weights)
constexpr int kBlockNR = 4;                   // weight rows per tile
constexpr int kBlockChunk = kFloatBlockRows;  // x rows per chunk: 3 tiles
constexpr int kBlockedMinM = 6;               // below this the tiles above (kernel_bench matmul)
// Above this the tiles above again: prefill 512 (TinyLlama F16, 2 threads, alternating runs) gave
// 95.2 / 97.8 tok/s on them against 92.7 / 98.4 with the blocks (each panel streams all the x
// chunks from L3 either way), so the proven tiles keep prefill; m = 16 ... 128 gain.
constexpr int kBlockedMaxM = 128;
// Whether a panel of m input rows gets x as float blocks (matmul.cc chooses by the same bounds).
constexpr bool Blocked(int m) {
  return m >= kBlockedMinM && m <= kBlockedMaxM;
}
static_assert(kBlockK % 16 == 0 && kBlockChunk % kBlockMR == 0, "whole steps and tiles");

// The widened weights of a thread's panel: kBlockRows rows of ldw floats (64-byte aligned; grown
// with the C allocator, as this TU calls no inline library function).
struct WidenedRows {
  float* w = nullptr;
  int64_t ldw = 0;
  ~WidenedRows() { std::free(w); }
  // Room for rows of k weights rounded up to whole blocks; false when out of memory.
  bool Reserve(int k) {
    const int64_t need = (static_cast<int64_t>(k) + kBlockK - 1) / kBlockK * kBlockK;
    if (need <= ldw) return true;
    std::free(w);
    w = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * kBlockRows * need));
    ldw = w != nullptr ? need : 0;
    return w != nullptr;
  }
};

struct BlockedScratch {
  alignas(64) float acc[kBlockChunk][kBlockRows][16];  // lane sums between blocks
  WidenedRows rows;
};

// Accumulator (i, j) of a tile whose first one is at acc (rows of kBlockRows accumulators).
inline float* Acc(float* acc, int i, int j) {
  return acc + (i * kBlockRows + j) * 16;
}

// Tile MR x NR over `steps` 16-weight steps of the block from weight p0: accumulators from acc
// and back. The first tile of a row group (kWiden) widens the weights from the matrix (src: a
// Rows view whose row j is the tile's row j) as it goes and leaves them in w (row j at
// w + j * ldw) for the others, so the weight stream overlaps its FMAs; the rest read w. x and w
// are zero past k, so a row's tail is one more step, as the tiles above zero-fill theirs.
// Steps [pf0, pf1) also fetch the same steps of the row group's next block into L2: split over
// all the group's tiles of the chunk, the weights stream from DRAM at an even rate, where from
// the widening tiles alone the prefetches waited on each other's fill buffers.
template <int MR, int NR, bool kWiden, class Rows>
void BlockedTile(const float (*x)[kBlockK], float* w, int64_t ldw, int steps, float* acc,
                 const Rows src, int p0, int k, int pf0, int pf1) {
  // whole steps inside the row (the widening tile loads the tail step masked)
  const int whole = !kWiden || (k - p0) / 16 >= steps ? steps : (k - p0) / 16;
  // Every index below is a constant before GCC's scalar replacement runs (a pack expansion, not a
  // loop that is unrolled later), so the accumulators live in registers only: with loops GCC kept
  // a stack copy of them and spent a store and a load per accumulator and call on it.
  [ x, w, ldw, acc, src, p0, k, steps, whole, pf0,
    pf1 ]<int... A>(std::integer_sequence<int, A...>) {
    __m512 a[MR * NR];
    ((a[A] = _mm512_load_ps(Acc(acc, A / NR, A % NR))), ...);
    const auto step = [&]<int... J>(std::integer_sequence<int, J...>, int p, bool tail)
        __attribute__((always_inline)) {
      __m512 wv[NR];
      float* const wp = w + p0 + p;
      if (p >= pf0 && p < pf1) src.PrefetchL2(NR, p0 + p + kBlockK);
      if constexpr (kWiden) {
        if (tail) {
          const __mmask16 mask = static_cast<__mmask16>((1u << (k - p0 - p)) - 1);
          ((wv[J] = src.LoadTail(J, p0 + p, mask)), ...);
        } else {
          ((wv[J] = src.Load(J, p0 + p)), ...);
        }
        ((_mm512_store_ps(wp + J * ldw, wv[J])), ...);
      } else {
        ((wv[J] = _mm512_load_ps(wp + J * ldw)), ...);
      }
      ((a[A] = _mm512_fmadd_ps(_mm512_load_ps(x[A / NR] + p), wv[A % NR], a[A])), ...);
    };
    for (int p = 0; p < whole * 16; p += 16) step(std::make_integer_sequence<int, NR>{}, p, false);
    if (whole < steps) step(std::make_integer_sequence<int, NR>{}, whole * 16, true);
    ((_mm512_store_ps(Acc(acc, A / NR, A % NR), a[A])), ...);
  }
  (std::make_integer_sequence<int, MR * NR>{});
}

template <int MR, int NR, bool kWiden, class Rows>
void BlockedTileOf(int mr, int nr, const float (*x)[kBlockK], float* w, int64_t ldw, int steps,
                   float* acc, const Rows& src, int p0, int k, int pf0, int pf1) {
  if constexpr (MR > 1) {
    if (mr < MR) {
      return BlockedTileOf<MR - 1, NR, kWiden>(mr, nr, x, w, ldw, steps, acc, src, p0, k, pf0, pf1);
    }
  }
  if constexpr (NR > 1) {
    if (nr < NR) {
      return BlockedTileOf<MR, NR - 1, kWiden>(mr, nr, x, w, ldw, steps, acc, src, p0, k, pf0, pf1);
    }
  }
  BlockedTile<MR, NR, kWiden>(x, w, ldw, steps, acc, src, p0, k, pf0, pf1);
}

// y[0:m, n0:n1] from x in float blocks (MakeFloatBlocks), with rows_of(j) the Rows view
// (RowMajorRows, PackedRows16) whose row i is weight row j + i, for j = n0, n0 + 4, ... The
// weights of each kBlockRows rows are widened once, by the first chunk's first tiles, for all
// the chunks of x.
template <class RowsOf>
void BlockedPanel(const float* x, int m, int k, int n0, int n1, const float* bias, float* y,
                  int ldy, const RowsOf& rows_of) {
  static thread_local BlockedScratch s;
  if (!s.rows.Reserve(k)) {  // 64 KiB per 1024 of k: as a std::vector would, give up
    std::fprintf(stderr, "matmul: out of memory for %d widened weight rows of %d\n", kBlockRows, k);
    std::abort();
  }
  const int64_t ldw = s.rows.ldw;
  const int blocks = (k + kBlockK - 1) / kBlockK;
  for (int r0 = n0; r0 < n1; r0 += kBlockRows) {
    const int r1 = n1 - r0 < kBlockRows ? n1 : r0 + kBlockRows;
    for (int c0 = 0; c0 < m; c0 += kBlockChunk) {
      const int c1 = m - c0 < kBlockChunk ? m : c0 + kBlockChunk;
      for (int i = 0; i < c1 - c0; ++i) {
        for (int j = 0; j < r1 - r0; ++j) _mm512_store_ps(s.acc[i][j], _mm512_setzero_ps());
      }
      for (int p0 = 0; p0 < k; p0 += kBlockK) {
        const int steps = ((k - p0 < kBlockK ? k - p0 : kBlockK) + 15) / 16;
        const auto* xb = reinterpret_cast<const float(*)[kBlockK]>(
            x + ((static_cast<int64_t>(c0 / kBlockChunk) * blocks + p0 / kBlockK) * kBlockChunk) *
                    kBlockK);
        for (int j = r0; j < r1; j += kBlockNR) {
          const int nr = r1 - j < kBlockNR ? r1 - j : kBlockNR;
          float* const w = s.rows.w + (j - r0) * ldw;
          for (int i = c0; i < c1; i += kBlockMR) {
            const int mr = c1 - i < kBlockMR ? c1 - i : kBlockMR;
            float* const acc = s.acc[i - c0][j - r0];
            // the first chunk's tiles of the group share the next block's prefetch
            const int t = (i - c0) / kBlockMR, tiles = (c1 - c0 + kBlockMR - 1) / kBlockMR;
            const int pf0 = c0 == 0 ? steps * t / tiles * 16 : 0;
            const int pf1 = c0 == 0 ? steps * (t + 1) / tiles * 16 : 0;
            if (i == 0) {  // the panel's first tile of the row group widens its weights
              BlockedTileOf<kBlockMR, kBlockNR, true>(mr, nr, xb, w, ldw, steps, acc, rows_of(j),
                                                      p0, k, pf0, pf1);
            } else {
              BlockedTileOf<kBlockMR, kBlockNR, false>(mr, nr, xb + (i - c0), w, ldw, steps, acc,
                                                       rows_of(j), p0, k, pf0, pf1);
            }
          }
        }
      }
      for (int i = c0; i < c1; ++i) {
        for (int j = r0; j < r1; ++j) {
          const float sum = ReduceAdd(_mm512_load_ps(s.acc[i - c0][j - r0]));
          y[static_cast<int64_t>(i) * ldy + j] = bias != nullptr ? sum + bias[j] : sum;
        }
      }
    }
  }
}

// The row-major panels (F32, F16, BF16): the tiles above below kBlockedMinM rows.
template <class Loader>
void RowMajorPanel(const float* x, int m, int k, const void* wv, int n0, int n1, const float* bias,
                   float* y, int ldy) {
  if (!Blocked(m)) return MatmulPanel<Avx512Micro<Loader>>(x, m, k, wv, n0, n1, bias, y, ldy);
  const auto* w = static_cast<const typename Loader::W*>(wv);
  BlockedPanel(x, m, k, n0, n1, bias, y, ldy, [w, k](int j) {
    return RowMajorRows<Loader>{w + static_cast<int64_t>(j) * k, k};
  });
}

// The packed F16 / BF16 panels (groups of 4 rows, f16_packed.h; n0 a multiple of 4).
template <class Loader>
void PackedPanel(const float* x, int m, int k, const void* wv, int n0, int n1, const float* bias,
                 float* y, int ldy) {
  if (!Blocked(m)) {
    return PackedRowsPanel<Avx512Micro<Loader, 6>, PackedRows16<Loader>>(x, m, k, wv, n0, n1, bias,
                                                                         y, ldy);
  }
  const auto* w = static_cast<const uint16_t*>(wv);
  BlockedPanel(x, m, k, n0, n1, bias, y, ldy, [w, k, n1](int g) {
    return PackedRows16<Loader>{w + static_cast<int64_t>(g) * k,
                                n1 - g < kF16PackRows ? n1 - g : kF16PackRows, k};
  });
}

}  // namespace

const MatmulKernels& Avx512MatmulKernels() {
  static const MatmulKernels kKernels = {"avx512",
                                         RowMajorPanel<F32Load>,
                                         RowMajorPanel<F16Load>,
                                         RowMajorPanel<Bf16Load>,
                                         &Avx512QuantKernels(),
                                         PackedPanel<F16Load>,
                                         PackedPanel<Bf16Load>,
                                         kBlockedMinM,
                                         kBlockedMaxM};
  return kKernels;
}

}  // namespace llm::kernels::internal
