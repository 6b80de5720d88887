// Matmul internals shared by the per-ISA translation units (matmul_scalar.cc, matmul_avx2.cc,
// matmul_avx512.cc). Each ISA provides a micro-kernel type; MatmulPanel walks a panel of weight
// rows with it. Everything here is a template over the micro-kernel, whose type lives in an
// anonymous namespace of its TU, so code compiled with -mavx512f never leaks into another TU
// (for the same reason this header calls no inline library function such as std::min).
//
// Batch invariance: a micro-kernel computes every output element y[i, j] with the same sequence
// of operations whatever its tile shape (MR x NR), the row's index and m: lane l of the element's
// accumulator sums x[i, p] * w[j, p] for p = l, l + L, ... in increasing p, the tail (k % L) is
// zero-padded, the lanes are reduced by a fixed tree and the bias is added last.
#pragma once

#include <cstdint>

#include "common/dtype.h"  // DType and constants only; no inline function of it is called here
#include "kernels/cpu/f16_packed.h"    // kF16PackRows, F16PackedChunk
#include "kernels/cpu/q8_0.h"          // BlockQ8_0
#include "kernels/cpu/quant_blocks.h"  // BlockQ8_K

namespace llm::kernels {
struct MatmulJob;  // cpu_ops.h
}  // namespace llm::kernels

namespace llm::kernels::internal {

// Computes y[0:m, n0:n1] (row stride ldy) for weight rows [n0, n1).
using MatmulPanelFn = void (*)(const float* x, int m, int k, const void* w, int n0, int n1,
                               const float* bias, float* y, int ldy);

// The block formats (quant_blocks.h): xq holds the m input rows already quantized to Q8_0 (the
// 32-block formats; PackedXGroups for their packed kernels) or Q8_K (K-quants).
using MatmulBlockPanelFn = void (*)(const void* xq, int m, int k, const void* w, int n0, int n1,
                                    const float* bias, float* y, int ldy);
// Orders of a Q8_K block's 8 chunks of 32 activations (bsums unchanged) that a K-quant panel
// may read (QuantMatmulKernels::x_order):
//  - kPairs 0 2 1 3 4 6 5 7: 64 consecutive bytes meet the low (or high) nibbles of 64
//    consecutive bytes of Q4_K / Q5_K quants;
//  - kHalves 0 4 1 5 2 6 3 7: 64 consecutive bytes meet bits 2j, 2j + 1 of Q2_K / Q3_K's 64 bytes
//    of quants (chunk j in qs[0..31], chunk j + 4 in qs[32..63]).
enum class Q8KOrder : uint8_t { kNatural, kPairs, kHalves };
// Where x in `order` has chunk h.
constexpr int Q8KChunkAt(Q8KOrder order, int h) {
  switch (order) {
    case Q8KOrder::kPairs:
      return (h & 4) | (h & 1) << 1 | (h >> 1 & 1);
    case Q8KOrder::kHalves:
      return 2 * (h & 3) + (h >> 2);
    default:
      return h;
  }
}
// Reorders the chunks of nb blocks from natural order to `order`.
void ReorderChunksQ8K(BlockQ8_K* x, int nb, Q8KOrder order);

struct QuantMatmulKernels {
  // Indexed by DType; null for the non-block formats. The packed layouts kQ4_0Packed ...
  // kQ5_1Packed (legacy_packed.h) have panels in the AVX2 and AVX-512 sets (on PackedXGroup
  // activations, as their file formats' panels, which pack on the fly); the scalar set unpacks
  // their rows (matmul.cc).
  MatmulBlockPanelFn fn[kNumMatmulFormats] = {};
  // The order of the chunks of the Q8_K activations the panel of this format reads, at every m
  // below tiles_min_m: the AVX-512 GEMV and panels (KMicro512) of Q4_K / Q5_K (kPairs) and of
  // Q2_K / Q3_K (kHalves).
  Q8KOrder x_order[kNumMatmulFormats] = {};
  // Panels on token tiles (the AMX set: K-quants on Q8KTokenTile, the 32-block formats on
  // Q8_0TokenTile activations), used from tiles_min_m input rows on; null where the set has none.
  MatmulBlockPanelFn tiles[kNumMatmulFormats] = {};
  int tiles_min_m = 0;
};

// Q8_K activations of 16 input rows ("tokens") for one 256-block, laid out as AMX reads them
// (matmul_amx.cc): q[l] is lane l's B tile, 8 rows (chunk h = 0..7) of the 16 tokens' 4 bytes
// 32h + 4l .. 32h + 4l + 3; bsum_pairs[l][t] is token t's bsums[2l], bsums[2l + 1] as one
// dword; rows past m are zero.
struct alignas(64) Q8KTokenTile {
  int8_t q[8][8][16][4];
  int32_t bsum_pairs[8][16];
  float d[16];
};
// Q8_0 activations of 16 tokens for one 32-block (the AMX panels of the 32-block formats):
// q is the B tile (8 rows: token t's quants 4h .. 4h + 3 at q[h][t]), d the scales, s the sums
// of each token's 32 quants as floats (S_b, for the formats with a min); tokens past m are zero.
struct alignas(64) Q8_0TokenTile {
  int8_t q[8][16][4];
  float d[16];
  float s[16];
};
// Tile t, block b at out[t * nb + b], for (m + 15) / 16 tiles.
void MakeQ8_0TokenTiles(const BlockQ8_0* x, int m, int nb, Q8_0TokenTile* out);

// F32 activations of 16 tokens for 16 k, split for the F16 panels on AMX-BF16 tiles
// (matmul_amx_f16.cc): x = xh + xl, both bf16 (xh: x's bits with the low 16 cleared; xl: x - xh
// rounded to nearest even); hi[p][t] holds token t's xh of weight p as both words of the dword,
// lo[p][t] its xl. Tile t, chunk c at out[t * (k / 16) + c]; tokens past m are zero.
struct alignas(64) Bf16TokenTile {
  uint32_t hi[16][16];
  uint32_t lo[16][16];
};
// The (m + 15) / 16 tiles of the m rows of x (k floats each); k % 16 == 0.
void MakeBf16TokenTiles(const float* x, int m, int k, Bf16TokenTile* out);
// The same tiles for BF16 weights (exact in bf16, so no weight split): per 32 k, hi[p][t] holds
// token t's xh of weights 2p and 2p + 1 as the low and high word, lo[p][t] its xl; tile t,
// chunk c at out[t * (k / 32) + c]; k % 32 == 0.
void MakeBf16PairTokenTiles(const float* x, int m, int k, Bf16TokenTile* out);

// The token tiles of m rows of nb Q8_K blocks: tile t, block b at out[t * nb + b], for
// Q8KTokenTileCount(m) tiles (an even count: the panels take two at a time).
int Q8KTokenTileCount(int m);
void MakeQ8KTokenTiles(const BlockQ8_K* x, int m, int nb, Q8KTokenTile* out);

const QuantMatmulKernels& ScalarQuantKernels();  // matmul_quant_scalar.cc
const QuantMatmulKernels& Avx2QuantKernels();    // matmul_quant_avx2.cc
const QuantMatmulKernels& Avx512QuantKernels();  // matmul_quant_avx512.cc

// Float input rows in k blocks (the k-blocked float panels of the AVX-512 and AVX2 sets,
// matmul_blocked.h): for each chunk of kFloatBlockRows rows and each block of kFloatBlockK
// columns, the chunk's rows' columns of that block, kFloatBlockK floats each, so a tile's
// operands are one contiguous run (rows k floats apart share L1 sets when k is a multiple of
// 1024). Row i's weights p of chunk c and block b: out[((c * blocks + b) * kFloatBlockRows +
// i % kFloatBlockRows) * kFloatBlockK + p % kFloatBlockK] with blocks = ceil(k / kFloatBlockK);
// zero past k (rows past m are not written).
constexpr int kFloatBlockK = 512;
constexpr int kFloatBlockRows = 18;
int64_t FloatBlocksSize(int m, int k);                               // floats
void MakeFloatBlocksRow(const float* xi, int i, int k, float* out);  // row i of x
void MakeFloatBlocks(const float* x, int m, int k, float* out);

struct MatmulKernels {
  const char* isa;
  MatmulPanelFn f32;
  MatmulPanelFn f16;
  MatmulPanelFn bf16;
  const QuantMatmulKernels* quant;
  // F16 / BF16 rows in groups of 4 (kF16Packed / kBF16Packed, f16_packed.h), or null where the
  // set has no such panels (matmul.cc then unpacks a panel's rows for its f16 / bf16 one).
  MatmulPanelFn f16_packed;
  MatmulPanelFn bf16_packed;
  // With float_blocks_min_m <= m <= float_blocks_max_m input rows the float panels (f32 ...
  // bf16_packed) read x as float blocks (MakeFloatBlocks); 0: never.
  int float_blocks_min_m = 0;
  int float_blocks_max_m = 0;
  // F16 rows (plain, packed) on Bf16TokenTile inputs when k % 16 == 0, BF16 rows on the pair
  // tiles when k % 32 == 0 (the AMX set on a CPU with AMX-BF16); null: the panels above.
  MatmulBlockPanelFn f16_tiles = nullptr;
  MatmulBlockPanelFn f16_packed_tiles = nullptr;
  MatmulBlockPanelFn bf16_tiles = nullptr;
  MatmulBlockPanelFn bf16_packed_tiles = nullptr;
  // The tiles above run from this many input rows on, the panels above them below: 1 keeps every
  // row's bits those of the row alone (batch invariance); more gives that up for speed.
  int float_tiles_min_m = 1;
  // F16 / BF16 rows in panels of 16 (kF16RowPanels / kBF16RowPanels, f16_row_panels.h): x is
  // the row itself at m = 1, else token tiles (MakeRowPanelTokens); n0 a multiple of 16 and at
  // most 64 rows a call. Null where the set has none (matmul.cc then unpacks a panel's rows for
  // its f16 / bf16 panel).
  MatmulPanelFn f16_row_panels = nullptr;
  MatmulPanelFn bf16_row_panels = nullptr;
  // Q1_0 rows in panels of 16 (kQ1_0RowPanels, q1_0_row_panels.h): the table GEMV on at most
  // kQ1_0LutMaxRows rows of tables (q1_0_tables makes a row's), and the panel GEMM on PackedX
  // rows beyond; n0 a multiple of 16. Null where the set has none (the AVX-512 VNNI set on a CPU
  // without VBMI and BITALG, the other sets): the panels' rows are unpacked for the set's Q1_0
  // kernels (as for the AMX tiles).
  MatmulBlockPanelFn q1_0_row_panels = nullptr;
  MatmulBlockPanelFn q1_0_row_panels_gemm = nullptr;
  void (*q1_0_tables)(const BlockQ8_0* x, int nb, uint8_t* out) = nullptr;
};

const MatmulKernels& ScalarMatmulKernels();
// Only call these when the CPU has the features (see matmul.cc).
const MatmulKernels& Avx2MatmulKernels();        // AVX2 + FMA + F16C
const MatmulKernels& Avx512MatmulKernels();      // AVX-512 F, BW, VL
const MatmulKernels& Avx512VnniMatmulKernels();  // AVX-512 F, BW, VL, VNNI
// AVX-512 VNNI with the quantized formats' prefill on AMX tiles (matmul_amx.cc).
const MatmulKernels& AmxMatmulKernels();
// Whether this CPU has AMX-INT8 and the kernel let this process use its tile data (Linux asks
// for it with arch_prctl; asked once).
bool AmxUsable();
// AmxUsable and AMX-BF16; then the panels of AmxFloatTilesPanel may run (matmul_amx_f16.cc).
bool AmxBf16Usable();
// What the F16 tiles panel's tile work costs on the calling thread's core, in ns per 16-k chunk
// of a 16-row panel and one token tile (kernel_bench amx): its two tile products alone, and
// with the loads of A and the token tile as the panel does them, every operand in L1. Zeros
// (usable false) without AMX-BF16. On a cloud VM the core's AMX unit may be shared with
// another guest's hyperthread: on the AMX host of 3 Dec 2026 the same loop took 15 ns or
// 70-78 ns by the minute and core (see README, "AMX tiles").
struct AmxChunkTimes {
  bool usable = false;
  double products_ns = 0, with_loads_ns = 0;
};
AmxChunkTimes TimeAmxF16Chunks(int chunks);
// The tiles panel of kF16, kF16Packed, kBF16 or kBF16Packed rows; null for other formats.
MatmulBlockPanelFn AmxFloatTilesPanel(DType t);
// From which m F16 / BF16 run on AMX-BF16 tiles, by LLM_AMX_F16 (env, may be null): unset or
// "0": never (0); "1": every m (1, batch-invariant); "batched": from kAmxF16BatchedMinM rows
// (not batch-invariant: a row's bits depend on its batch's size). Another value is reported on
// stderr and read as unset.
constexpr int kAmxF16BatchedMinM = 16;
int AmxF16TilesMinM(const char* env);
// Those panels with the tile operations in software (tests on CPUs with AVX-512 but no AMX).
MatmulBlockPanelFn SoftFloatTilesPanel(DType t);

constexpr int kMaxMatmulIsas = 5;

// The kernel sets this CPU can run, best first (at most kMaxMatmulIsas); returns how many.
int AvailableMatmulKernels(const MatmulKernels* out[kMaxMatmulIsas]);
// Matmul with a given kernel set (Matmul uses the best available one, or the one named by the
// environment variable LLM_MATMUL_ISA = "avx512-amx" | "avx512-vnni" | "avx512" | "avx2-fma" |
// "scalar" when this CPU has it).
void MatmulWith(const MatmulKernels& ks, const float* x, int m, int k, const void* w, DType w_type,
                int n, const float* bias, float* y);
// MatmulSameInput (cpu_ops.h) with a given kernel set.
void MatmulSameInputWith(const MatmulKernels& ks, const float* x, int m, int k,
                         const ::llm::kernels::MatmulJob* jobs, int count);

constexpr int kMaxTile = 4;  // MR and NR are at most this

// Software prefetch of a weight row kPrefetchBytes ahead of the block being multiplied: each
// call fetches the cache lines that start inside [block + D, block + D + sizeof(Block)), so
// consecutive blocks of a row fetch each line once. The block-format tiles do so much work per
// byte that the hardware prefetcher alone leaves a GEMV streaming from DRAM at a fraction of its
// in-cache speed (Q4_K, 1 thread, 104 MB of weights: 4.7 GB/s without, 10.3 GB/s with D = 2 KiB;
// 1, 4 and 8 KiB measured worse). A prefetch past the end of the weights cannot fault.
constexpr uintptr_t kPrefetchBytes = 2048;

// Prefetch distances that measured best on one CPU family and worse on another, chosen once per
// process by CPU vendor (matmul.cc) before the first matmul. TinyLlama decode at 2 threads,
// alternating runs:
//  - the packed 32-block formats (legacy_packed.h): AMD Zen 4 (27 Nov 2026) Q4_0 24-27 tok/s
//    without, 31-34 at 2 KiB ahead, 34-38 at 4 KiB, 34-36 at 8 KiB; Intel Xeon with AMX (28 Nov)
//    Q4_0 37-38 at 1-2 KiB, 33 at 3 KiB, 31 at 4-8 KiB; Q5_1 25-27 at 2 KiB, 23 at 4 KiB;
//  - the F16 GEMV (AVX-512): Zen 4 slower with any (21.1 -> 15.8 GB/s at 1 thread, 25 Nov);
//    the Xeon 10.0-10.1 tok/s without, 9.6-9.8 at 1 KiB, 11.3 at 2 KiB, 11.3-11.8 at 4 KiB,
//    11.3-11.5 at 8-16 KiB (0 = none);
//  - the packed F16 / BF16 GEMV (f16_packed.h, one stream per thread): the Xeon's prefetchers
//    leave it at 21-23 GB/s from DRAM (kernel_bench gemv, 2 threads, 29 Nov 2026), 26-28 at
//    1.5-3 KiB ahead (AVX-512; AVX2 29.5), 21-23 at 4-8 KiB; TinyLlama F16 decode 9.7-10.0 ->
//    11.0-12.1 tok/s. AMD Zen 4 keeps none: there the hardware prefetcher follows the one stream
//    (3894cc7 measured the packed layout on Zen 4 without). AMD Zen 5 (family 0x1A) takes 2 KiB
//    for the row panels (5 Dec 2026, TinyLlama F16 decode b1, 2 threads, none / 2 KiB
//    alternating: +6% median in 10 pairs of ~70 GB/s minutes, 9 of them ahead; -1% in 9 pairs
//    of ~48 GB/s minutes; 1, 3 and 4 KiB no better, 2 KiB with 6 KiB into L2 -10%).
//  - l2_ahead: a second prefetch of the same stream, this much further ahead and into L2 only
//    (T2), for the packed 32-block formats and the K-quant GEMVs. Further ahead, the prefetches
//    into L1 alone measured worse (the F16 packed GEMV 22-24 GB/s at 2 KiB, 17-18 at 4 KiB: they
//    hold the Xeon's few fill buffers longer), while an L2 one beside them overlaps more of
//    DRAM's latency. kernel_bench gemv from DRAM (a round robin over twice the L3), 2 threads,
//    30 Nov 2026, two alternating rounds, GB/s without / with 2 KiB more: Q4_0 packed 21.1-26.0 /
//    23.2-27.6, Q4_K 21.2-24.2 / 22.2-25.2, Q6_K 19.6-22.9 / 24.6-27.3. TinyLlama decode b1,
//    three alternating pairs: Q4_K_M 37.6-37.9 / 38.2-39.2 tok/s, Q4_0 43.2-43.9 / 43.8-46.4.
//    Then 6 KiB more, not 2 (the Xeon without AMX, 2 Dec 2026: k = 2048, n = 5632 from DRAM,
//    2 threads, alternating in one process, GB/s medians of 9-11, 2 / 6 KiB): Q4_K 17.4-19.1 /
//    18.4-19.8, Q2_K 15.1-17.8 / 16.1-18.3, Q4_0 packed 21.4 / 22.6, Q8_0 packed 24.0 / 23.9.
//    AMD: unmeasured, none.
//  - blocked_spread: how the k-blocked float panels' tiles share the fetching of the next
//    weights (matmul_blocked.h's PrefetchShare): spread over all their steps (the Xeon) or in
//    runs (AMD Zen 4).
//  - f16_packed_l2: the packed F16 / BF16 GEMV's L2 prefetch, this much beyond its L1 one
//    (PrefetchPackedStep). On the Xeon without AMX (Emerald Rapids, 2 Dec 2026), 2 threads, k =
//    2048, n = 5632 from DRAM, alternating in one process, GB/s medians of 9-11: none 19.2-19.9,
//    4 KiB beyond 2 KiB 20.4, 6 KiB 22.0-22.4, 8 KiB 21.9-22.0, 14 KiB 20.7-22.0; AVX2 19.2 ->
//    21.7. TinyLlama F16 decode b1, four alternating pairs: 7.0-9.0 -> 9.3-10.9 tok/s. In cache
//    (weights in L2) it costs ~10% (AVX-512 47 -> 40 GB/s), which only models that fit in the
//    L3 see. (An earlier "slower with it" for these rows, 30 Nov, was measured while GCC had
//    dropped the tile's L1 prefetch: see PrefetchLine.) AMD: none, as f16_packed.
//  - f16_gemv_groups: the AVX-512 packed F16 / BF16 GEMV (m = 1) reads the 4 groups of a panel
//    as 4 streams at once, as llama.cpp's F16 kernel reads 6 rows (matmul_avx512.cc,
//    PackedGroups16): on the Xeon with AMX (2 Dec 2026), TinyLlama's shapes from DRAM, one
//    against four groups in the same process 19.4 -> 26.4 and 15.3 -> 20.4 GB/s; TinyLlama F16
//    decode b1, four alternating runs, 8.4-8.8 -> 10.1-11.1 tok/s (llama.cpp 9.7-10.8). AMD:
//    off (unmeasured there; its prefetcher follows the one stream).
//  - legacy_gemv_streams: the AVX-512 GEMV of the packed 32-block formats reads a panel's rows as
//    4 streams, a quarter of the panel each (MatmulBlockPanel): on the Xeon with AMX (3 Dec
//    2026), TinyLlama's Q8_0 shapes from DRAM (22 x q k v o gate up down, then the output), 2
//    threads, alternating in one process, GB/s medians of 12-15: one stream 15.6 / two 17.6 /
//    four 18.3 (eight 15-18, worse than four); one / four 17.1 / 20.3. Q4_0, Q5_0 and Q5_1 alike
//    (15.8-16.7 either way: these do more work per byte, and 2 threads compute them at about
//    that speed in cache). TinyLlama Q8_0 decode b1, alternating runs: 19.0 / 20.7 -> 24.9 /
//    24.0 tok/s. AMD: off (unmeasured; its Q8_0 GEMV runs the AVX2 panel there).
//  - kquant_l1: how far ahead the K-quant GEMV rows (matmul_kquant_gemv512.h) prefetch into L1,
//    kPrefetchBytes but on AMD Zen 5 (family 0x1A), whose 512-bit units compute these rows at
//    64-118 GB/s in cache at 2 threads (Zen 4: 21-34): there the 2 KiB distance left them short of
//    the memory. kernel_bench's DRAM GEMV (k = 2048, n = 5632, 2 threads), distances alternating in
//    one process, 25 rounds, GB/s medians, 2 / 6 KiB ahead: Q4_K 61.6 / 70.8, Q6_K 65.0 / 73.2,
//    Q2_K 50.2 / 53.7, Q3_K (packed) 54.0 / 56.3 (0: 60.8, 65.0, 50.4, 53.5; 4 KiB between; 8-16
//    KiB as 6), against F16 row panels 67.6 and packed Q4_0 69.7 in the same rounds (5 Dec 2026,
//    a minute when 2 threads read ~70 GB/s; in the host's slower minutes, ~48 GB/s, every
//    distance reads the same). TinyLlama decode b1 (llm-bench, 2 threads, 2 / 6 KiB alternating,
//    pairs whose read loops both measured > 60 GB/s): Q4_K_M 93.0 / 107.3 tok/s (42 pairs),
//    Q3_K_M 103.0 / 114.2 (30), Q2_K 124.3 / 135.0 (14); in the ~48 GB/s minutes +3%. Zen 4 and
//    others keep 2 KiB (not measured there since).
//  - f16_panels_wide: the F16 / BF16 row panels' L1 prefetch when a token tile has 8 rows or
//    more (batched decode, prefill's first tile): each 64-byte line then feeds 16 T FMAs, so the
//    2 KiB that keep a GEMV's lines in flight (f16_packed) cover less time than DRAM's latency
//    at T = 16 (32 lines x 16 cycles ~ 120 ns at 4.3 GHz). AMD Zen 5, 6 Dec 2026, 2 threads,
//    kernel_bench matmul F16 row panels m = 16 from DRAM (k = n = 4096), alternating, GFLOP/s:
//    2 KiB 362-425 / 4 KiB 440-461 / 8 KiB 437-454 (the FMA peak: 546). TinyLlama F16
//    (llm-bench, 2 threads, 2 / 4 / 8 KiB alternating, 3 rounds): decode b16 185-192 / 211-221 /
//    208-220 tok/s, b12 195-197 / 207-220 / 199-206, b8 160 / 168-185 / 179-189, prefill 512
//    221-222 / 225-232 / 227-230; b2-b6 level or worse at 4 KiB, so those tiles keep 2 KiB.
//    Elsewhere f16_packed's distance (unmeasured).
//  - kquant_tiles: how far ahead the K-quant tiles of 2+ input rows (matmul_quant_x86.h's KMicro
//    and KMicro512, PrefetchWeights) fetch each weight block into L1: kPrefetchBytes but on AMD
//    Zen 5, where at 2 KiB batch 2 decoded slower than batch 1 (the GEMV fetches 6 KiB ahead,
//    kquant_l1). TinyLlama decode (llm-bench, 2 threads, alternating, 6 Dec 2026), tokens/s at
//    2 / 8 KiB: Q4_K_M b2 83.6-84.5 / 119.6-126.1, b4 117.2-121.1 / 132.3-133.6, b8 177.7-188.7 /
//    196.3-203.2 (6, 12, 16, 24 KiB: b2 111-123, b8 189-216), b16 251-256 / 252-258; Q2_K b2
//    93.9-95.1 / 116.4-118.5; Q3_K_M b2 95.0-98.2 / 112.3-114.9. The grid i-quants' and the
//    ternary formats' tiles (IQMicro, batch 1 too) take the same distance: TQ2_0 b1 141.5-145.9 /
//    145.0-152.3, b2 175.7-186.7 / 192.2-200.7, b8 level (4 pairs). Zen 4 and others keep 2 KiB
//    (measured alike in cache on Zen 4, matmul_quant_x86.h).
//  - packed_legacy_tiles: the same for the packed 32-block formats' tiles of 2+ rows
//    (matmul_legacy_packed_x86.h): packed_legacy but on AMD Zen 5, 8 KiB. TinyLlama Q8_0 decode
//    (llm-bench, 2 threads, 4 / 8 KiB alternating, 5 pairs, 6 Dec 2026), medians: b2 90.7 /
//    96.7 tok/s, b4 134.4 / 169.0, b8 212.5 / 252.3 (8 KiB ahead in all 5 pairs), b16 231.1 /
//    253.5 (all 5), prefill 16 tokens 244 / 268; 16 KiB (3 rounds) as 8.
struct PrefetchDistances {
  uintptr_t packed_legacy;
  uintptr_t f16_gemv;
  uintptr_t f16_packed;
  uintptr_t l2_ahead;
  bool blocked_spread;
  uintptr_t f16_packed_l2;   // beyond f16_packed
  bool f16_gemv_groups;      // the AVX-512 packed F16 / BF16 GEMV reads a panel's 4 groups at once
  bool legacy_gemv_streams;  // the packed 32-block GEMV reads a panel as 4 streams
  uintptr_t kquant_l1 = kPrefetchBytes;  // the K-quant GEMV rows' L1 prefetch (0: none)
  // The F16 / BF16 row panels' L1 prefetch for token tiles of 8 rows or more (f16_packed below).
  uintptr_t f16_panels_wide = 0;  // (PrefetchDistancesFor sets both tiles' distances)
  // The K-quant tiles' weight prefetch (m > 1: KMicro, KMicro512; the i-quant and ternary
  // IQMicro at every m; PrefetchWeights).
  uintptr_t kquant_tiles = kPrefetchBytes;
  // The packed 32-block formats' tiles of 2+ rows (packed_legacy is their GEMV's).
  uintptr_t packed_legacy_tiles = 0;
};
extern PrefetchDistances g_prefetch;
// The distances for a CPU vendor (AMD or not) and family (cpuid leaf 1, base + extended; Zen 4
// 0x19, Zen 5 0x1A): g_prefetch is this CPU's.
PrefetchDistances PrefetchDistancesFor(bool is_amd, unsigned family);
// The packed Q8_0 GEMV (m = 1) of an AVX-512 set runs the AVX2 set's panel (the same bits: both
// give the scalar reference's): on AMD Zen 4 the AVX2 one streams more of the memory bandwidth
// (TinyLlama Q8_0 decode at 2 threads, 28 Nov 2026, alternating: 23.5-27.2 tok/s against
// 15.6-20.8; at batch 16 and in prefill AVX-512 stays ahead, 134-140 against 73-77 tok/s).
// Chosen with g_prefetch (matmul.cc) by Q8_0GemvOnAvx2.
extern bool g_q8_0_gemv_avx2;
// The route: never without AVX2; else env ("0" or "1", LLM_Q8_0_GEMV_AVX2) when set, or the CPU
// vendor (on for AMD). Any other env value is reported on stderr and the vendor's default kept.
bool Q8_0GemvOnAvx2(const char* env, bool has_avx2, bool is_amd);
// A software prefetch of the line at `at` (a hint: past the end of a buffer it does not fault)
// into L1 (kL1) or L2, that the compiler keeps. GCC 12's IPA mod/ref analysis let it delete a
// loop of __builtin_prefetch calls from the packed F16 GEMV tile once the loop had a second,
// run-time L2 distance: the tile then streamed 14-15 GB/s from DRAM instead of 18-19.
template <bool kL1>
[[gnu::always_inline]] static inline void PrefetchLine(uintptr_t at) {
#if defined(__x86_64__)
  if constexpr (kL1) {
    asm volatile("prefetcht0 %0" : : "m"(*reinterpret_cast<const char*>(at)));
  } else {
    asm volatile("prefetcht2 %0" : : "m"(*reinterpret_cast<const char*>(at)));
  }
#else
  __builtin_prefetch(reinterpret_cast<const void*>(at), 0, kL1 ? 3 : 1);
#endif
}
// (static: every TU, compiled with its own ISA flags, keeps its own copy.)
[[gnu::always_inline]] static inline void PrefetchAhead(const void* at, uintptr_t bytes,
                                                        uintptr_t ahead = kPrefetchBytes,
                                                        uintptr_t l2_ahead = 0) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(at) + ahead;
  for (uintptr_t line = (a + 63) & ~uintptr_t{63}; line < a + bytes; line += 64) {
    PrefetchLine<true>(line);
    // the same line l2_ahead further on, into L2 (g_prefetch.l2_ahead)
    if (l2_ahead != 0) PrefetchLine<false>(line + l2_ahead);
  }
}
// The packed F16 / BF16 rows' one stream (f16_packed.h): a GEMV step's `weights` weights of each
// row of a group of r rows from weight p on (a run of 2 * weights * r bytes), fetched `ahead`
// into L1 (none at 0) and `l2` further on into L2 (none at 0): g_prefetch.f16_packed and
// .f16_packed_l2, read once per group by the caller.
[[gnu::always_inline]] static inline void PrefetchPackedStep(const uint16_t* group, int r, int p,
                                                             int weights, uintptr_t ahead,
                                                             uintptr_t l2) {
  if (ahead == 0) return;
  const uintptr_t a = reinterpret_cast<uintptr_t>(group + F16PackedChunk(r, 0, p)) + ahead;
  const uintptr_t bytes = sizeof(uint16_t) * static_cast<uintptr_t>(weights) * r;
  for (uintptr_t off = 0; off < bytes; off += 64) PrefetchLine<true>(a + off);
  if (l2 == 0) return;
  for (uintptr_t off = 0; off < bytes; off += 64) PrefetchLine<false>(a + l2 + off);
}
template <class Block>
[[gnu::always_inline]] static inline void PrefetchWeights(const Block* block) {
  PrefetchAhead(block, sizeof(Block), g_prefetch.kquant_tiles);
}

template <class Micro>
using TileFn = void (*)(const float* x, int64_t ldx, const typename Micro::W* w, int64_t ldw, int k,
                        const float* bias, float* y, int64_t ldy);

template <class Micro, int MR, int NR>
void TileAdapter(const float* x, int64_t ldx, const typename Micro::W* w, int64_t ldw, int k,
                 const float* bias, float* y, int64_t ldy) {
  Micro::template Tile<MR, NR>(x, ldx, w, ldw, k, bias, y, ldy);
}

template <class Micro>
constexpr TileFn<Micro> kTileFns[kMaxTile][kMaxTile] = {
    {TileAdapter<Micro, 1, 1>, TileAdapter<Micro, 1, 2>, TileAdapter<Micro, 1, 3>,
     TileAdapter<Micro, 1, 4>},
    {TileAdapter<Micro, 2, 1>, TileAdapter<Micro, 2, 2>, TileAdapter<Micro, 2, 3>,
     TileAdapter<Micro, 2, 4>},
    {TileAdapter<Micro, 3, 1>, TileAdapter<Micro, 3, 2>, TileAdapter<Micro, 3, 3>,
     TileAdapter<Micro, 3, 4>},
    {TileAdapter<Micro, 4, 1>, TileAdapter<Micro, 4, 2>, TileAdapter<Micro, 4, 3>,
     TileAdapter<Micro, 4, 4>},
};

// Rows of x handled per pass over a weight panel: the chunk of x stays in L2 while the panel's
// weight rows stream through it.
constexpr int kRowChunk = 16;

template <class Micro>
void MatmulPanel(const float* x, int m, int k, const void* wv, int n0, int n1, const float* bias,
                 float* y, int ldy) {
  static_assert(Micro::kMR <= kMaxTile && Micro::kNR <= kMaxTile, "tiles of kTileFns");
  const auto* w = static_cast<const typename Micro::W*>(wv);
  for (int c0 = 0; c0 < m; c0 += kRowChunk) {
    const int c1 = m < c0 + kRowChunk ? m : c0 + kRowChunk;
    // A GEMV (m = 1) walks the panel one weight row at a time: one sequential stream per thread
    // reads DRAM far faster than NR interleaved rows (F16 TinyLlama decode at 2 threads: 13.0
    // -> 18.3-19.2 tok/s). The tile shape never changes an element's operations (see above).
    const int kNR = m == 1 ? 1 : Micro::kNR;
    for (int j = n0; j < n1; j += kNR) {
      const int nr = n1 - j < kNR ? n1 - j : kNR;
      for (int i = c0; i < c1; i += Micro::kMR) {
        const int mr = c1 - i < Micro::kMR ? c1 - i : Micro::kMR;
        kTileFns<Micro>[mr - 1][nr - 1](
            x + static_cast<int64_t>(i) * k, k, w + static_cast<int64_t>(j) * k, k, k,
            bias != nullptr ? bias + j : nullptr, y + static_cast<int64_t>(i) * ldy + j, ldy);
      }
    }
  }
}

// Dispatches a tile of mr x nr (mr <= MR, nr <= NR) of a group of packed 16-bit rows to
// Micro::TileOn<mr, nr>.
template <class Micro, int MR, int NR, class Rows>
void PackedRowsTile(int mr, int nr, const float* x, int64_t ldx, const Rows& w, int k,
                    const float* bias, float* y, int64_t ldy) {
  if constexpr (MR > 1) {
    if (mr < MR) return PackedRowsTile<Micro, MR - 1, NR>(mr, nr, x, ldx, w, k, bias, y, ldy);
  }
  if constexpr (NR > 1) {
    if (nr < NR) return PackedRowsTile<Micro, MR, NR - 1>(mr, nr, x, ldx, w, k, bias, y, ldy);
  }
  Micro::template TileOn<MR, NR>(x, ldx, w, k, bias, y, ldy);
}

// The panel of F16 / BF16 rows packed in groups of 4 (kF16Packed, kBF16Packed: f16_packed.h):
// each group is one tile's columns, so a GEMV (m = 1) reads one sequential stream into four
// chains; every element keeps the operations of the unpacked tiles (Micro::TileOn on the
// micro-kernel's view Rows{group, r, k} of a group of r rows). n0 is a multiple of 4 (panels
// are whole groups).
template <class Micro, class Rows>
void PackedRowsPanel(const float* x, int m, int k, const void* wv, int n0, int n1,
                     const float* bias, float* y, int ldy) {
  static_assert(Micro::kNR == kF16PackRows, "a group is one tile wide");
  const auto* w = static_cast<const uint16_t*>(wv);
  // kRowChunk rounded up to whole tiles (18 rows for the AVX-512 set's 6-row tiles)
  constexpr int kChunk = (kRowChunk + Micro::kMR - 1) / Micro::kMR * Micro::kMR;
  for (int c0 = 0; c0 < m; c0 += kChunk) {
    const int c1 = m < c0 + kChunk ? m : c0 + kChunk;
    for (int g = n0; g < n1; g += kF16PackRows) {
      const int r = n1 - g < kF16PackRows ? n1 - g : kF16PackRows;
      Rows rows{w + static_cast<int64_t>(g) * k, r, k};
      // Past one chunk of x the group's weights come from L2 for the later chunks (prefill):
      // no software prefetch there, as before it was measured for the small batches.
      if (m > kChunk) rows.ahead = 0;
      for (int i = c0; i < c1; i += Micro::kMR) {
        const int mr = c1 - i < Micro::kMR ? c1 - i : Micro::kMR;
        PackedRowsTile<Micro, Micro::kMR, Micro::kNR>(mr, r, x + static_cast<int64_t>(i) * k, k,
                                                      rows, k, bias != nullptr ? bias + g : nullptr,
                                                      y + static_cast<int64_t>(i) * ldy + g, ldy);
      }
    }
  }
}

// Dispatches a tile of mr x nr (mr <= MR, nr <= NR) to Micro::Tile<mr, nr> (only the shapes up
// to the micro-kernel's own are instantiated).
template <class Micro, int MR, int NR>
void BlockTile(int mr, int nr, const typename Micro::XBlock* x, int64_t ldx,
               const typename Micro::WBlock* w, int64_t ldw, int nb, const float* bias, float* y,
               int64_t ldy) {
  if constexpr (MR > 1) {
    if (mr < MR) return BlockTile<Micro, MR - 1, NR>(mr, nr, x, ldx, w, ldw, nb, bias, y, ldy);
  }
  if constexpr (NR > 1) {
    if (nr < NR) return BlockTile<Micro, MR, NR - 1>(mr, nr, x, ldx, w, ldw, nb, bias, y, ldy);
  }
  Micro::template Tile<MR, NR>(x, ldx, w, ldw, nb, bias, y, ldy);
}

// Whether a micro-kernel has a GemvRow of its own for m = 1 (and wants paired chunks).
template <class Micro>
constexpr bool HasGemvRow() {
  if constexpr (requires { Micro::kHasGemvRow; }) {
    return Micro::kHasGemvRow;
  } else {
    return false;
  }
}
// A micro-kernel's panel: its own Panel where it has one, else MatmulBlockPanel over its tiles.
template <class Micro>
void MatmulBlockPanel(const void* xv, int m, int k, const void* wv, int n0, int n1,
                      const float* bias, float* y, int ldy);
template <class Micro>
constexpr MatmulBlockPanelFn BlockPanelOf() {
  if constexpr (requires { Micro::Panel; }) {
    return Micro::Panel;
  } else {
    return MatmulBlockPanel<Micro>;
  }
}
template <class Micro>
constexpr Q8KOrder XOrderOf() {
  if constexpr (requires { Micro::kXOrder; }) {
    return Micro::kXOrder;
  } else {
    return Q8KOrder::kNatural;
  }
}
// How many weight rows a micro-kernel's GEMV reads at once as separate streams
// (Micro::kGemvStreams; the packed 32-block formats' AVX-512 tiles), else 1.
template <class Micro>
constexpr int GemvStreams() {
  if constexpr (requires { Micro::kGemvStreams; }) {
    return Micro::kGemvStreams;
  } else {
    return 1;
  }
}
// A row's stride in XBlocks (activations) and WBlocks (weights) for nb blocks of the format:
// nb, unless the micro-kernel reads another layout (the packed 32-block formats: groups of 16
// activation blocks, weight rows in bytes).
template <class Micro>
constexpr int64_t XStride(int nb) {
  if constexpr (requires { Micro::XStride(nb); }) {
    return Micro::XStride(nb);
  } else {
    return nb;
  }
}
template <class Micro>
constexpr int64_t WStride(int nb) {
  if constexpr (requires { Micro::WStride(nb); }) {
    return Micro::WStride(nb);
  } else {
    return nb;
  }
}

// The block-format panel: MatmulPanel's loop over a micro-kernel with block types XBlock
// (activations) and WBlock (weights) of kBlock weights.
template <class Micro>
void MatmulBlockPanel(const void* xv, int m, int k, const void* wv, int n0, int n1,
                      const float* bias, float* y, int ldy) {
  const auto* xq = static_cast<const typename Micro::XBlock*>(xv);
  const auto* w = static_cast<const typename Micro::WBlock*>(wv);
  const int nb = k / Micro::kBlock;
  const int64_t ldx = XStride<Micro>(nb), ldw = WStride<Micro>(nb);
  if constexpr (HasGemvRow<Micro>()) {
    if (m == 1) {  // a row at a time, as the tiles below would at m = 1 (same bits)
      for (int j = n0; j < n1; ++j) {
        const float s = Micro::GemvRow(xv, w + j * ldw, nb);
        y[j] = bias != nullptr ? s + bias[j] : s;
      }
      return;
    }
  }
  if constexpr (constexpr int kS = GemvStreams<Micro>(); kS > 1) {
    // A GEMV on a panel of kS equal parts: row j of every part in one 1 x kS tile, so each part is
    // read front to back as a stream of its own (g_prefetch.legacy_gemv_streams: the Xeon's
    // prefetchers keep more of DRAM busy for several streams than for one). A row's operations
    // are those of the 1 x 1 tiles below: the same bits.
    if (m == 1 && g_prefetch.legacy_gemv_streams && n1 - n0 >= kS && (n1 - n0) % kS == 0) {
      const int part = (n1 - n0) / kS;
      for (int j = n0; j < n0 + part; ++j) {
        float s[kS] = {};
        Micro::template Tile<1, kS>(xq, ldx, w + j * ldw, part * ldw, nb, nullptr, s, 0);
        for (int t = 0; t < kS; ++t) {
          const int r = j + t * part;
          y[r] = bias != nullptr ? s[t] + bias[r] : s[t];
        }
      }
      return;
    }
  }
  const int kNR = m == 1 ? 1 : Micro::kNR;  // GEMV: one weight stream (see MatmulPanel)
  for (int c0 = 0; c0 < m; c0 += kRowChunk) {
    const int c1 = m < c0 + kRowChunk ? m : c0 + kRowChunk;
    for (int j = n0; j < n1; j += kNR) {
      const int nr = n1 - j < kNR ? n1 - j : kNR;
      for (int i = c0; i < c1; i += Micro::kMR) {
        const int mr = c1 - i < Micro::kMR ? c1 - i : Micro::kMR;
        BlockTile<Micro, Micro::kMR, Micro::kNR>(mr, nr, xq + i * ldx, ldx, w + j * ldw, ldw, nb,
                                                 bias != nullptr ? bias + j : nullptr,
                                                 y + static_cast<int64_t>(i) * ldy + j, ldy);
      }
    }
  }
}

}  // namespace llm::kernels::internal
