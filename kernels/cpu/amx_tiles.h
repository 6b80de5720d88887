// What both AMX translation units (matmul_amx.cc, matmul_amx_f16.cc) use: the tile
// configuration's memory layout and the store of a 16 x 16 output tile. Included inside each
// TU's anonymous namespace (compiled with that TU's ISA flags), like matmul_quant_x86.h.
#pragma once

// The 64 bytes ldtilecfg reads (palette 1: up to 8 tiles of 16 rows x 64 bytes).
struct TileConfig {
  uint8_t palette, start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

// out[row][token] (16 x 16, a token tile's outputs) into y for tokens t0 .. m - 1 and rows
// n0 .. n0 + rows - 1: one token's row of outputs at a time, one cache line of y per token.
void StoreRows(const float (*out)[16], int t0, int m, int rows, float* y, int ldy, int n0) {
  const int count = m - t0 < 16 ? m - t0 : 16;
  const __mmask16 valid = static_cast<__mmask16>((1u << rows) - 1);
  const __m512i column =
      _mm512_set_epi32(240, 224, 208, 192, 176, 160, 144, 128, 112, 96, 80, 64, 48, 32, 16, 0);
  for (int e = 0; e < count; ++e) {
    const __m512 v =
        _mm512_i32gather_ps(_mm512_add_epi32(column, _mm512_set1_epi32(e)), &out[0][0], 4);
    _mm512_mask_storeu_ps(y + static_cast<int64_t>(t0 + e) * ldy + n0, valid, v);
  }
}
