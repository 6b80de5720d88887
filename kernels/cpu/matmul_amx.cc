// AMX kernel set ("avx512-amx"): the AVX-512 VNNI set, with the panels of the K-quants and of the
// 32-block formats computed on AMX tiles from QuantMatmulKernels::tiles_min_m input rows on
// (prefill, large batches). Same integers, same float operations as quant_blocks.h defines: the
// same bits as every other set.
//
// K-quants: the reference splits each 256-block into 8 lanes: lane l holds the elements
// 32h + 4l .. 32h + 4l + 3 of every chunk h, and sums sc[2h + l / 4] * u[e] * x[e] over them in
// an int32 (L_l), which one float lane accumulates. A tile product sums over its whole K, so a
// lane is one product with K = 32 bytes: the weights' lane l (16 rows x 8 chunks x 4 bytes, tile
// A) times the tokens' lane l (Q8KTokenTile::q[l], 8 rows of 16 tokens x 4 bytes, tile B). The
// sub-block scale is folded into the weights (sc * u, |sc * u| <= 63 * 128), which int8 cannot
// hold, so it is split as lo + 256 hi (lo in 0..255, unsigned: tdpbusd; hi in -32..31: tdpbssd):
// two products per lane, and L_l = lo_sum + (hi_sum << 8), exact (the reference's int32 holds
// L_l, and |hi_sum| <= 32 * 32 * 128, so neither part overflows). The float side then follows
// the reference: per lane two fmas per block.
//
// Per panel (16 weight rows) the rows are decoded once for every block into that layout
// (WeightTileK, in L2: 8.6 KiB a block) and every pair of token tiles streams through them.
// The 32-block formats: see AmxLegacyPanel.
// GCC 12 warns inside its own AVX-512 intrinsics (GCC bug 105593, see matmul_avx512.cc).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cpu/iquant_blocks.h"
#include "kernels/cpu/kquant_packed.h"
#include "kernels/cpu/legacy_packed.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/q8_0.h"
#include "kernels/cpu/quant_blocks.h"

namespace llm::kernels::internal {
namespace {

#include "kernels/cpu/amx_tiles.h"         // NOLINT: included into this TU's anonymous namespace
#include "kernels/cpu/matmul_quant_x86.h"  // NOLINT: included into this TU's anonymous namespace

// 16 weight rows of one 256-block, decoded for the tiles: lo[l] / hi[l] is lane l's A tile
// (16 rows x 32 bytes: chunk h's 4 bytes at 4h), then each row's d, dmin and its mins in
// pairs (mn[2l], mn[2l + 1] as dword l). Rows past the panel are zero.
struct alignas(64) WeightTileK {
  int8_t lo[8][16][32];
  int8_t hi[8][16][32];
  int32_t mn_pairs[16][8];
  float d[16], dmin[16];
};

// Transposes 8 rows of 8 dwords in place.
inline void Transpose8x8(__m256i r[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
  }
}

// Row r of `t` from one weight block: sc * u per element, split into lo and hi bytes, chunk by
// chunk, then transposed so that each lane's 8 dwords are one tile row.
template <class F>
void DecodeRow(const typename F::B& block, int r, WeightTileK* t) {
  const qx::KHeader h = F::Header(block);
  t->d[r] = h.d;
  t->dmin[r] = h.dmin;
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(t->mn_pairs[r]), h.mn);
  // sc * u per element in int16, the even and odd bytes of a chunk apart: word i of either holds
  // element 2i or 2i + 1, whose group is ScaleOf's lane i. The int16 product's low byte is lo,
  // its high byte hi (p = lo + 256 hi, two's complement), so both come back by byte blends.
  const __mmask32 odd = 0xAAAAAAAAu;
  __m256i lo[8], hi[8];
  for (int c = 0; c < 8; ++c) {
    const __m256i u = F::Chunk(block, c);
    const __m256i s = qx::ScaleOf<F>(h.sc, c);
    const __m256i even = _mm256_mullo_epi16(_mm256_and_si256(u, _mm256_set1_epi16(0x00FF)), s);
    const __m256i odds = _mm256_mullo_epi16(_mm256_srli_epi16(u, 8), s);
    lo[c] = _mm256_mask_blend_epi8(odd, even, _mm256_slli_epi16(odds, 8));
    hi[c] = _mm256_mask_blend_epi8(odd, _mm256_srli_epi16(even, 8), odds);
  }
  Transpose8x8(lo);
  Transpose8x8(hi);
  for (int l = 0; l < 8; ++l) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(t->lo[l][r]), lo[l]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(t->hi[l][r]), hi[l]);
  }
}

// Tiles 0, 1: a lane of the weights (lo, hi); 2, 3: a lane of two token tiles; 4..7 the
// products (lo and hi of each token tile). The 32-block panels use 0, 2, 4 and 5 of these shapes.
void ConfigureTiles() {
  TileConfig c{};
  c.palette = 1;
  for (int t = 0; t < 2; ++t) c.rows[t] = 16, c.colsb[t] = 32;
  for (int t = 2; t < 4; ++t) c.rows[t] = 8, c.colsb[t] = 64;
  for (int t = 4; t < 8; ++t) c.rows[t] = 16, c.colsb[t] = 64;
  // Not _tile_loadconfig: GCC 12's asm for it tells the compiler it reads 8 bytes of the config,
  // so the stores of the rest could be dropped or sunk past it (seen: a zero config, SIGILL).
  __asm__ volatile("ldtilecfg %0" : : "m"(c));
}

// y[0:m, n0:n1] for the K-quant F on token tiles (the panel has at most 16 rows).
template <class F>
void AmxKPanel(const void* xv, int m, int k, const void* wv, int n0, int n1, const float* bias,
               float* y, int ldy) {
  const auto* tokens = static_cast<const Q8KTokenTile*>(xv);
  const auto* w = static_cast<const typename F::B*>(wv);
  const int nb = k / kQK_K, rows = n1 - n0;
  static thread_local std::vector<WeightTileK> decoded;
  if (decoded.size() < static_cast<size_t>(nb)) decoded.resize(nb);
  for (int b = 0; b < nb; ++b) {
    WeightTileK& t = decoded[b];
    for (int r = 0; r < rows; ++r) DecodeRow<F>(w[static_cast<int64_t>(n0 + r) * nb + b], r, &t);
    for (int r = rows; r < 16; ++r) {
      for (int l = 0; l < 8; ++l) {
        std::memset(t.lo[l][r], 0, 32);
        std::memset(t.hi[l][r], 0, 32);
      }
      std::memset(t.mn_pairs[r], 0, sizeof(t.mn_pairs[r]));
      t.d[r] = t.dmin[r] = 0.0f;
    }
  }
  ConfigureTiles();
  // The products of one lane of one block for a pass's token tiles: lo, hi of tile 0, then of 1.
  alignas(64) int32_t c[2][4][16][16];  // two lanes' worth: the next one's tiles run meanwhile
  alignas(64) float acc[2][16][8][16];  // [token tile][row][lane][token]
  // One pass over the panel for kN (2, or 1 for the last of an odd count) token tiles from tt.
  auto pass = [&]<int kN>(int tt) {
    const Q8KTokenTile* x0 = tokens + static_cast<int64_t>(tt) * nb;
    const Q8KTokenTile* x1 = x0 + nb;                    // (not read when kN is 1)
    auto products = [&](int q, int32_t(*out)[16][16]) {  // lane q % 8 of block q / 8
      const int b = q >> 3, l = q & 7;
      _tile_loadd(0, decoded[b].lo[l], 32);
      _tile_loadd(1, decoded[b].hi[l], 32);
      _tile_loadd(2, x0[b].q[l], 64);
      _tile_zero(4);
      _tile_zero(5);
      _tile_dpbusd(4, 0, 2);
      _tile_dpbssd(5, 1, 2);
      _tile_stored(4, out[0], 64);
      _tile_stored(5, out[1], 64);
      if constexpr (kN == 2) {  // tiles 6, 7 as 4, 5 above: GCC's tile intrinsics take their
                                // tile numbers as literals (stringified), not as parameters
        _tile_loadd(3, x1[b].q[l], 64);
        _tile_zero(6);
        _tile_zero(7);
        _tile_dpbusd(6, 0, 3);
        _tile_dpbssd(7, 1, 3);
        _tile_stored(6, out[2], 64);
        _tile_stored(7, out[3], 64);
      }
    };
    // d_w * d_x and -(dmin_w * d_x) per row and token tile: the same for every lane of a block.
    __m512 dd[2][16], dm[2][16];
    // hi << 8 in each dword as a byte shuffle (port 5; the shift would queue on port 0)
    const __m512i shl8 =
        _mm512_broadcast_i32x4(_mm_set_epi32(0x0E0D0CFF, 0x0A0908FF, 0x060504FF, 0x020100FF));
    products(0, c[0]);
    for (int q = 0; q < 8 * nb; ++q) {
      // The tiles of the next lane go while this one's float side runs (a second buffer).
      if (q + 1 < 8 * nb) products(q + 1, c[(q + 1) & 1]);
      const int b = q >> 3, l = q & 7;
      const WeightTileK& wt = decoded[b];
      if (l == 0) {
        __m512 dx[kN];
        for (int i = 0; i < kN; ++i) dx[i] = _mm512_load_ps(x0[i * nb + b].d);
        for (int r = 0; r < 16; ++r) {
          for (int i = 0; i < kN; ++i) {
            dd[i][r] = _mm512_mul_ps(_mm512_set1_ps(wt.d[r]), dx[i]);
            dm[i][r] = _mm512_mul_ps(_mm512_set1_ps(-wt.dmin[r]), dx[i]);
          }
        }
      }
      const int32_t(*cq)[16][16] = c[q & 1];
      __m512i bs[kN];
      for (int i = 0; i < kN; ++i) bs[i] = _mm512_load_si512(x0[i * nb + b].bsum_pairs[l]);
      for (int r = 0; r < 16; ++r) {
        const __m512i mn = _mm512_set1_epi32(wt.mn_pairs[r][l]);
        for (int i = 0; i < kN; ++i) {
          const __m512i lsum =
              _mm512_add_epi32(_mm512_load_si512(cq[2 * i][r]),
                               _mm512_shuffle_epi8(_mm512_load_si512(cq[2 * i + 1][r]), shl8));
          const __m512i msum = _mm512_madd_epi16(mn, bs[i]);
          __m512 a = b == 0 ? _mm512_setzero_ps() : _mm512_load_ps(acc[i][r][l]);
          a = _mm512_fmadd_ps(dd[i][r], _mm512_cvtepi32_ps(lsum), a);
          a = _mm512_fmadd_ps(dm[i][r], _mm512_cvtepi32_ps(msum), a);
          _mm512_store_ps(acc[i][r][l], a);
        }
      }
    }
    for (int i = 0; i < kN; ++i) {
      const int t0 = 16 * (tt + i);
      alignas(64) float out[16][16];  // [row][token]
      for (int r = 0; r < 16; ++r) {
        const float(*a)[16] = acc[i][r];
        __m512 s =
            _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_load_ps(a[0]), _mm512_load_ps(a[4])),
                                        _mm512_add_ps(_mm512_load_ps(a[2]), _mm512_load_ps(a[6]))),
                          _mm512_add_ps(_mm512_add_ps(_mm512_load_ps(a[1]), _mm512_load_ps(a[5])),
                                        _mm512_add_ps(_mm512_load_ps(a[3]), _mm512_load_ps(a[7]))));
        if (bias != nullptr && r < rows) s = _mm512_add_ps(s, _mm512_set1_ps(bias[n0 + r]));
        _mm512_store_ps(out[r], s);
      }
      StoreRows(out, t0, m, rows, y, ldy, n0);
    }
  };
  // Tiles past m are zero (Q8KTokenTileCount is even); a last pass over one of them would double
  // the float side for nothing.
  const int tiles = (m + 15) / 16;
  int tt = 0;
  for (; tt + 2 <= tiles; tt += 2) pass.template operator()<2>(tt);
  if (tt < tiles) pass.template operator()<1>(tt);
  _tile_release();
}

// The 32-block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0; quant_blocks.h): one integer lane per
// block and 16 float chains (block b in chain b % 16). A block's 32 products are one tile product
// with K = 32: the weights' signed values (u - offset, or u for the formats with a min: the
// integer D_b - offset S_b, or D_b, at once) times the tokens' quants. 16 weight rows of one
// block, decoded for the tiles:
struct alignas(64) WeightTileLegacy {
  int8_t q[16][32];
  float d[16], m[16];
};

// The 32 signed values of a 32-block format's block: elements 0..15 in the low nibbles of qs,
// 16..31 in the high ones; Q5_*: plus 16 where bit e of qh is set; the formats without a min
// then less their offset (8, 16).
// F: a LegacyFormat (matmul_legacy_packed_x86.h).
template <class F>
void DecodeNibbles(__m128i qs, const uint8_t* qh, int8_t* out) {
  __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), _mm256_set1_epi8(0x0F));
  if constexpr (F::kFifth) u = _mm256_or_si256(u, qx::FifthBits(qh));
  if constexpr (!F::kMin) u = _mm256_sub_epi8(u, _mm256_set1_epi8(F::kFifth ? 16 : 8));
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), u);
}

// Row r of tiles out[0 .. nb) from one weight row in ggml's layout.
template <class F>
void DecodeFileRow(const uint8_t* row, int nb, int r, WeightTileLegacy* out) {
  using B = typename F::B;
  const auto* blocks = reinterpret_cast<const B*>(row);
  for (int b = 0; b < nb; ++b) {
    WeightTileLegacy& t = out[b];
    const B& blk = blocks[b];
    if constexpr (F::kInt8) {  // the quants as they are
      std::memcpy(t.q[r], blk.qs, 32);
    } else {
      const uint8_t* qh = nullptr;
      if constexpr (F::kFifth) qh = blk.qh;
      DecodeNibbles<F>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs)), qh, t.q[r]);
    }
    t.d[r] = _cvtsh_ss(blk.d);
    if constexpr (F::kMin) {
      t.m[r] = _cvtsh_ss(blk.m);
    } else {
      t.m[r] = 0.0f;
    }
  }
}

// The same from a row in the packed layout (legacy_packed.h) of Q8_0, Q4_0 or Q4_1: in a group
// of T blocks, block b's quad r is the dword at 4 T r + 4 b, its scale (then its min) after the
// runs. One gather per block.
template <class F>
void DecodePackedRow(const uint8_t* row, int nb, int r, WeightTileLegacy* out) {
  static_assert(!F::kFifth, "the Q5 layouts are unpacked first");
  for (int g = 0; g * kPackGroupBlocks < nb; ++g) {
    const int count =
        nb - g * kPackGroupBlocks < kPackGroupBlocks ? nb - g * kPackGroupBlocks : kPackGroupBlocks;
    const uint8_t* group = row + static_cast<size_t>(g) * kPackGroupBlocks * sizeof(typename F::B);
    const auto* d = reinterpret_cast<const uint16_t*>(group + F::kRuns * 4 * count);
    const __m256i runs =
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(4 * count));
    for (int b = 0; b < count; ++b) {
      WeightTileLegacy& t = out[g * kPackGroupBlocks + b];
      const __m256i at = _mm256_add_epi32(runs, _mm256_set1_epi32(4 * b));
      if constexpr (F::kInt8) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(t.q[r]),
                           _mm256_i32gather_epi32(reinterpret_cast<const int*>(group), at, 1));
      } else {
        DecodeNibbles<F>(
            _mm_i32gather_epi32(reinterpret_cast<const int*>(group), _mm256_castsi256_si128(at), 1),
            nullptr, t.q[r]);
      }
      t.d[r] = _cvtsh_ss(d[b]);
      if constexpr (F::kMin) {
        t.m[r] = _cvtsh_ss(d[count + b]);
      } else {
        t.m[r] = 0.0f;
      }
    }
  }
}

// A byte of weight rows as a type of this TU: std::vector<uint8_t>'s members compiled here (with
// AVX-512) could be the copies the linker keeps for every TU; this vector's are this TU's own.
struct RowByte {
  uint8_t byte;
};

// The panel's rows (file format F, or its packed layout) decoded block by block; rows past the
// panel are zero. The packed Q5 layouts (their fifth bits in masks across a group) are unpacked
// to ggml's layout first.
template <class F, bool kPacked>
void DecodeLegacyPanel(const void* wv, int k, int n0, int rows, WeightTileLegacy* out) {
  const int nb = k / kQKLegacy;
  const size_t row_bytes = static_cast<size_t>(nb) * sizeof(typename F::B);
  const auto* w = static_cast<const uint8_t*>(wv) + row_bytes * n0;
  constexpr bool kUnpackFirst = kPacked && F::kFifth;
  if constexpr (kUnpackFirst) {
    static thread_local std::vector<RowByte> unpacked;
    if (unpacked.size() < row_bytes * 16) unpacked.resize(row_bytes * 16);
    UnpackLegacyRows(F::kType, w, rows, k, &unpacked.data()->byte);
    w = &unpacked.data()->byte;
  }
  for (int r = 0; r < rows; ++r) {
    if constexpr (kPacked && !kUnpackFirst) {
      DecodePackedRow<F>(w + row_bytes * r, nb, r, out);
    } else {
      DecodeFileRow<F>(w + row_bytes * r, nb, r, out);
    }
  }
  for (int b = 0; b < nb; ++b) {
    for (int r = rows; r < 16; ++r) {
      std::memset(out[b].q[r], 0, 32);
      out[b].d[r] = out[b].m[r] = 0.0f;
    }
  }
}

// y[0:m, n0:n1] for a 32-block format on Q8_0 token tiles (the panel has at most 16 rows).
// Tiles: 0 the weights of a block, 2 a token tile's quants, 4 and 5 the products of a block
// (used in turn, so that one block's product is computed while the float side reads the last).
template <class F, bool kPacked>
void AmxLegacyPanel(const void* xv, int m, int k, const void* wv, int n0, int n1, const float* bias,
                    float* y, int ldy) {
  const auto* tokens = static_cast<const Q8_0TokenTile*>(xv);
  const int nb = k / kQKLegacy, rows = n1 - n0;
  static thread_local std::vector<WeightTileLegacy> decoded;
  if (decoded.size() < static_cast<size_t>(nb)) decoded.resize(nb);
  DecodeLegacyPanel<F, kPacked>(wv, k, n0, rows, decoded.data());
  ConfigureTiles();  // the K-quants' shapes: tiles 0, 2, 4 and 5 are the ones used here
  alignas(64) int32_t c[2][16][16];   // [buffer][row][token]
  alignas(64) float acc[16][16][16];  // [chain][row][token]
  const Q8_0TokenTile* x = nullptr;
  auto product = [&]<int kSet>(int b) {
    _tile_loadd(0, decoded[b].q, 32);
    _tile_loadd(2, x[b].q, 64);
    if constexpr (kSet == 0) {  // (the tile intrinsics take their tile numbers as literal tokens)
      _tile_zero(4);
      _tile_dpbssd(4, 0, 2);
      _tile_stored(4, c[0], 64);
    } else {
      _tile_zero(5);
      _tile_dpbssd(5, 0, 2);
      _tile_stored(5, c[1], 64);
    }
  };
  const int tiles = (m + 15) / 16;
  for (int t = 0; t < tiles; ++t) {
    x = tokens + static_cast<int64_t>(t) * nb;
    // A chain starts at zero (its first block loads no accumulator); chains no block reaches
    // (nb < 16) stay zero for the sum.
    if (nb < 16) std::memset(acc[nb], 0, sizeof(acc[0]) * (16 - nb));
    product.template operator()<0>(0);
    for (int b = 0; b < nb; ++b) {
      if (b + 1 < nb) {
        if ((b + 1) & 1) {
          product.template operator()<1>(b + 1);
        } else {
          product.template operator()<0>(b + 1);
        }
      }
      const int32_t(*cb)[16] = c[b & 1];
      const WeightTileLegacy& wt = decoded[b];
      const __m512 dx = _mm512_load_ps(x[b].d);
      float(*chain)[16] = acc[b % 16];
      for (int r = 0; r < 16; ++r) {
        __m512 a = b < 16 ? _mm512_setzero_ps() : _mm512_load_ps(chain[r]);
        a = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(wt.d[r]), dx),
                            _mm512_cvtepi32_ps(_mm512_load_si512(cb[r])), a);
        if constexpr (F::kMin) {
          a = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(wt.m[r]), dx), _mm512_load_ps(x[b].s),
                              a);
        }
        _mm512_store_ps(chain[r], a);
      }
    }
    alignas(64) float out[16][16];  // [row][token]
    for (int r = 0; r < 16; ++r) {
      __m512 h8[8], h4[4];
      for (int l = 0; l < 8; ++l) {
        h8[l] = _mm512_add_ps(_mm512_load_ps(acc[l][r]), _mm512_load_ps(acc[l + 8][r]));
      }
      for (int l = 0; l < 4; ++l) h4[l] = _mm512_add_ps(h8[l], h8[l + 4]);
      __m512 s = _mm512_add_ps(_mm512_add_ps(h4[0], h4[2]), _mm512_add_ps(h4[1], h4[3]));
      if (bias != nullptr && r < rows) s = _mm512_add_ps(s, _mm512_set1_ps(bias[n0 + r]));
      _mm512_store_ps(out[r], s);
    }
    StoreRows(out, 16 * t, m, rows, y, ldy, n0);
  }
  _tile_release();
}

// From 32 rows of input on the tiles are faster (kernel_bench matmul, k = n = 4096, 2 threads,
// m = 32: Q4_K 3.5 ms against the AVX-512 VNNI panels' 4.8-5.3, Q8_0 1.7-1.8 against 3.3-3.4;
// TinyLlama decode at batch 32: Q8_0 168-177 tok/s against 151-156, Q4_K_M 110-112 against
// 98-99). At 16 rows they lose in the model (batch 16: Q8_0 113-118 against 133-135, Q4_0
// 114-117 against 155-157): a step that reads every weight once is memory-bound, and decoding
// the panel for the tiles costs more than the tiles save.
constexpr int kTilesMinM = 32;

}  // namespace

bool AmxUsable() {
  static const bool usable = [] {
    unsigned a, b, c, d;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
    if (((d >> 24) & 1) == 0 || ((d >> 25) & 1) == 0) return false;  // AMX-TILE, AMX-INT8
    if (((c >> 27) & 1) == 0) return false;                          // OSXSAVE
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if (((lo >> 17) & 3) != 3) return false;  // XTILECFG, XTILEDATA enabled by the OS
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtileData = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
  }();
  return usable;
}

int AmxF16TilesMinM(const char* env) {
  if (env == nullptr || std::strcmp(env, "0") == 0) return 0;
  if (std::strcmp(env, "1") == 0) return 1;
  if (std::strcmp(env, "batched") == 0) return kAmxF16BatchedMinM;
  std::fprintf(stderr, "LLM_AMX_F16: expected 0, 1 or batched, got '%.32s'; using 0\n", env);
  return 0;
}

const MatmulKernels& AmxMatmulKernels() {
  static const QuantMatmulKernels kQuant = [] {
    QuantMatmulKernels q = *Avx512VnniMatmulKernels().quant;  // below tiles_min_m rows
    q.tiles[static_cast<int>(DType::kQ2_K)] = AmxKPanel<qx::Q2_KF>;
    q.tiles[static_cast<int>(DType::kQ3_K)] = AmxKPanel<qx::Q3_KF>;
    q.tiles[static_cast<int>(DType::kQ3_KPacked)] = AmxKPanel<qx::Q3_KPackedF>;
    q.tiles[static_cast<int>(DType::kQ4_K)] = AmxKPanel<qx::Q4_KF>;
    q.tiles[static_cast<int>(DType::kQ5_K)] = AmxKPanel<qx::Q5_KF>;
    q.tiles[static_cast<int>(DType::kQ6_K)] = AmxKPanel<qx::Q6_KF>;
    auto legacy = [&q]<class F>(F) {  // ggml's layout and the packed one
      q.tiles[static_cast<int>(F::kType)] = AmxLegacyPanel<F, false>;
      q.tiles[static_cast<int>(PackedLayoutOf(F::kType))] = AmxLegacyPanel<F, true>;
    };
    legacy(qx::Q4_0F{});
    legacy(qx::Q4_1F{});
    legacy(qx::Q5_0F{});
    legacy(qx::Q5_1F{});
    legacy(qx::Q8_0F{});
    q.tiles_min_m = kTilesMinM;
    return q;
  }();
  static const MatmulKernels kKernels = [] {
    MatmulKernels k = Avx512VnniMatmulKernels();  // the float formats: the AVX-512 set's
    k.isa = "avx512-amx";
    k.quant = &kQuant;
    // Opt-in: on an AMX host (2 Dec 2026, 2 threads) the tiles are right and faster from 16
    // rows on (TinyLlama F16 decode b16 83-84 against 61-65 tok/s, b64 119-133 against 63-65),
    // but at m = 1 they take 3 ms where the AVX-512 GEMV takes 1 (b1 4.8-5.7 against 10.4-10.6
    // tok/s): batch invariance keeps them at m = 1 too (LLM_AMX_F16=1), or they run from 16
    // rows on, the GEMV below, and a row's bits depend on its batch (LLM_AMX_F16=batched; README,
    // "On an Intel Xeon with AMX").
    const int min_m = AmxF16TilesMinM(std::getenv("LLM_AMX_F16"));
    if (AmxBf16Usable() && min_m > 0) {
      k.f16_tiles = AmxFloatTilesPanel(DType::kF16);
      k.f16_packed_tiles = AmxFloatTilesPanel(DType::kF16Packed);
      k.bf16_tiles = AmxFloatTilesPanel(DType::kBF16);
      k.bf16_packed_tiles = AmxFloatTilesPanel(DType::kBF16Packed);
      k.float_tiles_min_m = min_m;
    }
    return k;
  }();
  return kKernels;
}

}  // namespace llm::kernels::internal
