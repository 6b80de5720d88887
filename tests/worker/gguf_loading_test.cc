// Weights from GGUF files: variants of the golden llama.gguf rewritten here (BF16 weights, an
// unsupported type, a missing, an extra or a misshapen tensor) load or fail with an error naming
// the file and tensor; load_format gguf and dummy with a .gguf path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include "common/gguf.h"
#include "tests/common/gguf_writer.h"
#include "worker/model/model_weights.h"
#include "worker/model/rank_executor.h"

namespace llm::testing {
namespace {

namespace fs = std::filesystem;

std::string Shared(const std::string& rel) {
  return (fs::path(LLM_SHARED_DIR) / rel).string();
}

constexpr const char* kLlama = "golden/families/llama/llama.gguf";

// A tensor as it will be written: GGML dims, type and bytes.
struct Out {
  std::vector<uint64_t> dims;
  uint32_t type;
  std::string bytes;
  bool keep = true;
};

// Copies llama.gguf's metadata (the scalar, string and array kinds it uses) and its tensors,
// each passed through `edit` first, to `path`; `extra` may add tensors.
void Rewrite(const std::string& path, const std::function<void(const std::string&, Out*)>& edit,
             const std::function<void(GgufWriter&)>& extra = nullptr) {
  auto src = GgufFile::Open(Shared(kLlama));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  GgufWriter w;
  for (const auto& [key, v] : (*src)->metadata()) {
    switch (v.type) {
      case GgufType::kUint32:
        w.U32(key, static_cast<uint32_t>(v.bits));
        break;
      case GgufType::kFloat32:
        w.F32(key, static_cast<float>(v.f));
        break;
      case GgufType::kBool:
        w.Bool(key, v.bits != 0);
        break;
      case GgufType::kString:
        w.Str(key, v.str);
        break;
      case GgufType::kArray:
        if (v.elem_type == GgufType::kString) w.StrArray(key, v.strings);
        if (v.elem_type == GgufType::kFloat32) {
          w.F32Array(key, std::vector<float>(v.floats.begin(), v.floats.end()));
        }
        if (v.elem_type == GgufType::kInt32) {
          w.I32Array(key, std::vector<int32_t>(v.ints.begin(), v.ints.end()));
        }
        break;
      default:
        FAIL() << "unexpected type of " << key;
    }
  }
  for (const auto& t : (*src)->tensors()) {
    Out o{std::vector<uint64_t>(t.dims.begin(), t.dims.end()), t.type,
          std::string(static_cast<const char*>(t.data), t.nbytes)};
    edit(t.name, &o);
    if (o.keep) w.Tensor(t.name, o.dims, o.type, o.bytes);
  }
  if (extra) extra(w);
  w.Write(path);
}

class GgufLoading : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(Shared(kLlama))) GTEST_SKIP() << "missing shared test data: " << Shared(kLlama);
    dir_ = fs::temp_directory_path() / ("gguf_loading_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "m.gguf").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Expects loading path_ to fail with a message holding every part (and the path).
  void ExpectError(std::vector<std::string> parts) {
    auto w = LoadModelWeights(path_, LoadFormat::kSafetensors);
    ASSERT_FALSE(w.ok());
    parts.push_back(path_);
    for (const auto& p : parts) {
      EXPECT_NE(w.status().message().find(p), std::string::npos) << w.status().ToString();
    }
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(GgufLoading, Bf16WeightsLoadAndStayNearF32) {
  Rewrite(path_, [](const std::string&, Out* o) {
    if (o->type != 0 || o->dims.size() != 2) return;  // matrices only; norms stay F32
    std::string b(o->bytes.size() / 2, '\0');
    for (size_t i = 0; i < b.size() / 2; ++i) {
      float f;
      std::memcpy(&f, o->bytes.data() + 4 * i, 4);
      const uint16_t h = F32ToBf16(f);
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
    o->bytes = b;
    o->type = 30;
  });
  auto bf = LoadModelWeights(path_, LoadFormat::kGguf);
  ASSERT_TRUE(bf.ok()) << bf.status().ToString();
  EXPECT_EQ((*bf)->layers[0].q.format, DType::kBF16);
  EXPECT_EQ((*bf)->config.torch_dtype, DType::kBF16);
  auto f32 = LoadModelWeights(Shared(kLlama), LoadFormat::kGguf);
  ASSERT_TRUE(f32.ok());
  // One forward of the same prompt: logits within BF16 rounding.
  std::vector<std::vector<float>> logits;
  for (auto* w : {&*bf, &*f32}) {
    auto exec = RankExecutor::Create(**w);
    ASSERT_TRUE(exec.ok());
    ASSERT_TRUE((*exec)->AllocateCache(4, 16).ok());
    ForwardBatch& b = (*exec)->batch();
    b.Clear();
    b.token_ids = {1, 403, 407, 261, 378};
    b.positions = {0, 1, 2, 3, 4};
    b.slot_mapping = {0, 1, 2, 3, 4};
    b.logit_rows = {4};
    b.query_start = {0, 5};
    b.context_len = {5};
    b.max_blocks_per_seq = 1;
    b.block_tables = {0};
    auto out = (*exec)->Execute();
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    logits.emplace_back(*out, *out + 512);
  }
  double max_diff = 0;
  for (int v = 0; v < 512; ++v)
    max_diff = std::max<double>(max_diff, std::fabs(logits[0][v] - logits[1][v]));
  EXPECT_GT(max_diff, 0.0);
  EXPECT_LT(max_diff, 0.5);
}

// Types other than F32/F16/BF16, the Q*_0/1 and Q*_K block formats and IQ4_NL (here Q8_1, an
// activation format of ggml's: blocks of 32 like Q8_0, so the shape holds) are named with the
// tensor; block formats are for matrices only.
TEST_F(GgufLoading, UnsupportedTypesAreNamed) {
  Rewrite(path_, [](const std::string& name, Out* o) {
    if (name != "blk.0.ffn_gate.weight") return;
    o->type = 9;  // Q8_1: 32 weights in 36 bytes
    o->bytes.assign(192 * 2 * 36, '\0');
  });
  ExpectError({"tensor 'blk.0.ffn_gate.weight' is Q8_1, which is not supported yet"});
  Rewrite(path_, [](const std::string& name, Out* o) {
    if (name != "output_norm.weight") return;
    o->type = 8;
    o->bytes.assign(2 * 34, '\0');
  });
  ExpectError({"tensor 'output_norm.weight' is Q8_0", "for vectors"});
}

// Block-format matrices load as views of the file; rows that are not whole blocks of the type
// and data cut short are errors naming the tensor.
TEST_F(GgufLoading, BlockFormatsLoadAndBadOnesAreNamed) {
  Rewrite(path_, [](const std::string& name, Out* o) {
    if (name == "blk.0.ffn_down.weight") {  // [192, 64]: 6 Q4_0 blocks per row
      o->type = 2;
      o->bytes.assign(64 * 6 * 18, '\0');
    }
  });
  auto w = LoadModelWeights(path_, LoadFormat::kGguf);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ((*w)->layers[0].down.format, DType::kQ4_0);
  EXPECT_EQ((*w)->layers[1].down.format, DType::kF32);
  Rewrite(path_, [](const std::string& name, Out* o) {
    if (name != "blk.0.attn_q.weight") return;
    o->type = 12;  // Q4_K: rows of 64 are a quarter of a 256-weight super-block
    o->bytes.assign(64 * 144, '\0');
  });
  ExpectError(
      {"tensor 'blk.0.attn_q.weight' (Q4_K): row length 64 is not a multiple of the "
       "block size 256"});
  // IQ4_NL (blocks of 32) loads as itself; IQ4_XS (super-blocks of 256) cannot cut rows of 64
  Rewrite(path_, [](const std::string& name, Out* o) {
    if (name == "blk.0.ffn_down.weight") {  // [192, 64]: 6 IQ4_NL blocks per row
      o->type = 20;
      o->bytes.assign(64 * 6 * 18, '\0');
    }
  });
  auto nl = LoadModelWeights(path_, LoadFormat::kGguf);
  ASSERT_TRUE(nl.ok()) << nl.status().ToString();
  EXPECT_EQ((*nl)->layers[0].down.format, DType::kIQ4_NL);
  Rewrite(path_, [](const std::string& name, Out* o) {
    if (name != "blk.0.attn_q.weight") return;
    o->type = 23;  // IQ4_XS
    o->bytes.assign(64 * 136, '\0');
  });
  ExpectError(
      {"tensor 'blk.0.attn_q.weight' (IQ4_XS): row length 64 is not a multiple of the "
       "block size 256"});
  // the grid i-quants likewise (super-blocks of 256)
  Rewrite(path_, [](const std::string& name, Out* o) {
    if (name != "blk.0.attn_k.weight") return;
    o->type = 21;  // IQ3_S
    o->bytes.assign(64 * 110, '\0');
  });
  ExpectError(
      {"tensor 'blk.0.attn_k.weight' (IQ3_S): row length 64 is not a multiple of the "
       "block size 256"});
  // and the ternary ones
  Rewrite(path_, [](const std::string& name, Out* o) {
    if (name != "blk.0.attn_v.weight") return;
    o->type = 35;  // TQ2_0
    o->bytes.assign(64 * 66, '\0');
  });
  ExpectError(
      {"tensor 'blk.0.attn_v.weight' (TQ2_0): row length 64 is not a multiple of the "
       "block size 256"});
  // and Q1_0 (blocks of 128)
  Rewrite(path_, [](const std::string& name, Out* o) {
    if (name != "blk.0.ffn_gate.weight") return;  // [64, 192]: rows of 64
    o->type = 41;
    o->bytes.assign(192 * 9, '\0');
  });
  ExpectError(
      {"tensor 'blk.0.ffn_gate.weight' (Q1_0): row length 64 is not a multiple of the "
       "block size 128"});
  Rewrite(
      path_, [](const std::string&, Out*) {},
      [](GgufWriter& g) {  // the last tensor: 2 rows of 256 Q6_K weights, one block missing
        g.Tensor("blk.0.zz.weight", {256, 2}, 14, std::string(210, '\0'));
      });
  ExpectError({"tensor 'blk.0.zz.weight' (Q6_K [256, 2], 420 bytes", "lies outside"});
}

TEST_F(GgufLoading, MissingExtraAndMisshapenTensorsAreNamed) {
  Rewrite(path_, [](const std::string& name, Out* o) { o->keep = name != "blk.1.ffn_up.weight"; });
  ExpectError({"missing tensor 'blk.1.ffn_up.weight'"});
  Rewrite(
      path_, [](const std::string&, Out*) {},
      [](GgufWriter& w) {
        w.TensorF32("blk.0.mystery.weight", {4}, {1, 2, 3, 4});
      });
  ExpectError({"unexpected tensor 'blk.0.mystery.weight'"});
  Rewrite(path_, [](const std::string& name, Out* o) {
    if (name == "blk.0.attn_k.weight") o->dims = {32, 64};
  });
  ExpectError({"tensor 'blk.0.attn_k.weight' has shape [32, 64], expected [64, 32]"});
}

TEST_F(GgufLoading, LoadFormats) {
  auto folder = LoadModelWeights(Shared("golden/families/llama/hf"), LoadFormat::kGguf);
  ASSERT_FALSE(folder.ok());
  EXPECT_NE(folder.status().message().find("load format 'gguf' needs a .gguf file"),
            std::string::npos)
      << folder.status().ToString();
  auto dummy = LoadModelWeights(Shared(kLlama), LoadFormat::kDummy, 7);
  ASSERT_TRUE(dummy.ok()) << dummy.status().ToString();
  EXPECT_EQ((*dummy)->config.hidden_size, 64);
  EXPECT_EQ((*dummy)->layers.size(), 2u);
}

}  // namespace
}  // namespace llm::testing
