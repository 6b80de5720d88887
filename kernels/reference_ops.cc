#include "kernels/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/quant_blocks.h"

namespace llm::kernels::ref {

float LoadAsF32(const void* data, DType type, int64_t i) {
  switch (type) {
    case DType::kF32:
      return static_cast<const float*>(data)[i];
    case DType::kF16:
      return F16ToF32(static_cast<const uint16_t*>(data)[i]);
    case DType::kBF16:
      return Bf16ToF32(static_cast<const uint16_t*>(data)[i]);
    case DType::kQ8_0: {  // element i of a row-major matrix whose rows are whole blocks
      const auto* blk = static_cast<const uint8_t*>(data) + (i / kQ8BlockSize) * kQ8BlockBytes;
      uint16_t d;
      std::memcpy(&d, blk, 2);
      return static_cast<float>(static_cast<int8_t>(blk[2 + i % kQ8BlockSize])) * F16ToF32(d);
    }
    default: {  // the other block formats: dequantize the element's block
      const int bs = BlockSize(type);
      float block[kQK_K];
      internal::DequantizeRow(type, static_cast<const uint8_t*>(data) + (i / bs) * BlockBytes(type),
                              block, bs);
      return block[i % bs];
    }
  }
  return 0.0f;
}

void MatmulQ8Activations(const float* x, int m, int k, const void* w, int n, const float* bias,
                         float* y) {
  const int nb = k / kQ8BlockSize;
  const auto* wb = static_cast<const uint8_t*>(w);
  std::vector<int8_t> xq(k);
  std::vector<float> xd(nb);
  for (int i = 0; i < m; ++i) {
    const float* xr = x + static_cast<int64_t>(i) * k;
    for (int b = 0; b < nb; ++b) {  // ggml's quantize_row_q8_0 (x86), written out again
      float amax = 0;
      for (int t = 0; t < kQ8BlockSize; ++t) amax = std::max(amax, std::fabs(xr[b * 32 + t]));
      xd[b] = F16ToF32(F32ToF16(amax / 127.0f));
      const float id = amax != 0 ? 127.0f / amax : 0.0f;
      for (int t = 0; t < kQ8BlockSize; ++t) {
        xq[b * 32 + t] = static_cast<int8_t>(std::nearbyint(xr[b * 32 + t] * id));
      }
    }
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int b = 0; b < nb; ++b) {
        const uint8_t* blk = wb + (static_cast<int64_t>(j) * nb + b) * kQ8BlockBytes;
        uint16_t d;
        std::memcpy(&d, blk, 2);
        int64_t dot = 0;
        for (int t = 0; t < kQ8BlockSize; ++t) {
          dot += int64_t{static_cast<int8_t>(blk[2 + t])} * xq[b * 32 + t];
        }
        acc += static_cast<double>(F16ToF32(d)) * xd[b] * static_cast<double>(dot);
      }
      if (bias != nullptr) acc += bias[j];
      y[static_cast<int64_t>(i) * n + j] = static_cast<float>(acc);
    }
  }
}

void Matmul(const float* x, int m, int k, const void* w, DType w_type, int n, const float* bias,
            float* y) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int p = 0; p < k; ++p) {
        acc += static_cast<double>(x[static_cast<int64_t>(i) * k + p]) *
               LoadAsF32(w, w_type, static_cast<int64_t>(j) * k + p);
      }
      if (bias != nullptr) acc += bias[j];
      y[static_cast<int64_t>(i) * n + j] = static_cast<float>(acc);
    }
  }
}

void RmsNorm(const float* x, const float* weight, int rows, int dim, float eps, float* out) {
  for (int t = 0; t < rows; ++t) {
    const float* xr = x + static_cast<int64_t>(t) * dim;
    float* o = out + static_cast<int64_t>(t) * dim;
    double ss = 0.0;
    for (int i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    double inv = 1.0 / std::sqrt(ss / dim + eps);
    for (int i = 0; i < dim; ++i) o[i] = static_cast<float>(xr[i] * inv * weight[i]);
  }
}

void Rope(float* x, const int32_t* positions, int tokens, int heads, const RopeLayout& layout,
          const float* inv_freq) {
  const int half = layout.rotary_dim / 2;
  for (int t = 0; t < tokens; ++t) {
    for (int h = 0; h < heads; ++h) {
      float* v = x + (static_cast<int64_t>(t) * heads + h) * layout.head_dim;
      for (int i = 0; i < half; ++i) {
        // The angle is formed in float32 as Hugging Face does; cos/sin are exact in double.
        float angle = static_cast<float>(positions[t]) * inv_freq[i];
        double c = std::cos(static_cast<double>(angle)) * layout.mscale;
        double s = std::sin(static_cast<double>(angle)) * layout.mscale;
        float& a = layout.interleaved ? v[2 * i] : v[i];
        float& b = layout.interleaved ? v[2 * i + 1] : v[i + half];
        const double x0 = a, x1 = b;
        a = static_cast<float>(x0 * c - x1 * s);
        b = static_cast<float>(x1 * c + x0 * s);
      }
    }
  }
}

void SiluMul(const float* gate, const float* up, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) {
    double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void GeluTanhMul(const float* gate, const float* up, int64_t count, float* out) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  for (int64_t i = 0; i < count; ++i) {
    const double g = gate[i];
    out[i] =
        static_cast<float>(0.5 * g * (1.0 + std::tanh(k * (g + 0.044715 * g * g * g))) * up[i]);
  }
}

void Embedding(const int32_t* ids, int tokens, const void* table, DType table_type, int rows,
               int dim, int first_id, float* out) {
  for (int t = 0; t < tokens; ++t) {
    float* o = out + static_cast<int64_t>(t) * dim;
    const int64_t row = static_cast<int64_t>(ids[t]) - first_id;
    for (int i = 0; i < dim; ++i) {
      o[i] = (row < 0 || row >= rows) ? 0.0f : LoadAsF32(table, table_type, row * dim + i);
    }
  }
}

void ReshapeAndCache(const float* k, const float* v, int tokens, int kv_heads, int head_dim,
                     const int32_t* slot_mapping, int block_size, float* k_cache, float* v_cache) {
  int64_t row = static_cast<int64_t>(kv_heads) * head_dim;
  for (int t = 0; t < tokens; ++t) {
    int32_t slot = slot_mapping[t];
    if (slot < 0) continue;
    int64_t dst = (static_cast<int64_t>(slot / block_size) * block_size + slot % block_size) * row;
    std::memcpy(k_cache + dst, k + t * row, row * sizeof(float));
    std::memcpy(v_cache + dst, v + t * row, row * sizeof(float));
  }
}

void PagedAttention(const float* q, const float* k_cache, const float* v_cache,
                    const AttentionBatch& batch, const AttentionParams& p, float* out) {
  const int group = p.q_heads / p.kv_heads;
  const int64_t kv_row = static_cast<int64_t>(p.kv_heads) * p.head_dim;
  for (int s = 0; s < batch.num_seqs; ++s) {
    const int q_begin = batch.query_start[s];
    const int q_len = batch.query_start[s + 1] - q_begin;
    const int ctx = batch.context_len[s];
    const int32_t* table = batch.block_tables + static_cast<int64_t>(s) * batch.max_blocks_per_seq;
    for (int j = 0; j < q_len; ++j) {
      const int pos = ctx - q_len + j;
      const int first = p.sliding_window > 0 ? std::max(0, pos - p.sliding_window + 1) : 0;
      for (int h = 0; h < p.q_heads; ++h) {
        const float* qv = q + (static_cast<int64_t>(q_begin + j) * p.q_heads + h) * p.head_dim;
        const int kvh = h / group;
        std::vector<double> scores;
        std::vector<int64_t> offsets;
        for (int key = first; key <= pos; ++key) {
          int64_t phys = table[key / p.block_size];
          int64_t off = (phys * p.block_size + key % p.block_size) * kv_row + kvh * p.head_dim;
          double dot = 0.0;
          for (int d = 0; d < p.head_dim; ++d) dot += static_cast<double>(qv[d]) * k_cache[off + d];
          dot *= p.scale;
          if (p.softcap > 0.0f) dot = std::tanh(dot / p.softcap) * p.softcap;
          scores.push_back(dot);
          offsets.push_back(off);
        }
        double mx = -std::numeric_limits<double>::infinity();
        for (double sc : scores) mx = std::max(mx, sc);
        double sum = 0.0;
        for (double& sc : scores) sum += (sc = std::exp(sc - mx));
        float* o = out + (static_cast<int64_t>(q_begin + j) * p.q_heads + h) * p.head_dim;
        for (int d = 0; d < p.head_dim; ++d) {
          double acc = 0.0;
          for (size_t i = 0; i < scores.size(); ++i) acc += scores[i] * v_cache[offsets[i] + d];
          o[d] = static_cast<float>(scores.empty() ? 0.0 : acc / sum);
        }
      }
    }
  }
}

}  // namespace llm::kernels::ref
