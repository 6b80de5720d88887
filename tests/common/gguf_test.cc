// The GGUF reader (common/gguf.h): the golden files of ../shared/golden/families, every value
// type written and read back, and crafted bad files (written here) that must give a Status
// naming the file and the key or tensor, never a crash.
#include "common/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "tests/common/gguf_writer.h"

namespace llm::testing {
namespace {

namespace fs = std::filesystem;

std::string Shared(const std::string& rel) {
  return (fs::path(LLM_SHARED_DIR) / rel).string();
}

#define REQUIRE_SHARED(rel) \
  if (!fs::exists(Shared(rel))) GTEST_SKIP() << "missing shared test data: " << Shared(rel)

StatusOr<std::unique_ptr<GgufFile>> Parse(const std::string& bytes) {
  return GgufFile::FromMemory(bytes.data(), bytes.size(), "test.gguf");
}

// Expects a parse error whose message names the file and `what`.
void ExpectError(const std::string& bytes, const std::string& what, const std::string& label) {
  auto f = Parse(bytes);
  ASSERT_FALSE(f.ok()) << label << ": accepted";
  EXPECT_NE(f.status().message().find("test.gguf"), std::string::npos)
      << label << ": " << f.status().ToString();
  EXPECT_NE(f.status().message().find(what), std::string::npos)
      << label << ": " << f.status().ToString();
}

std::string F32Bytes(size_t n) {
  return std::string(n * 4, '\0');
}

// A small valid file: a few keys of each kind and two tensors.
GgufWriter SmallFile() {
  GgufWriter w;
  w.Str("general.architecture", "llama");
  w.U32("llama.block_count", 2);
  w.F32("llama.rope.freq_base", 10000.0f);
  w.StrArray("tokenizer.ggml.tokens", {"<unk>", "a", "b"});
  w.Tensor("a", {4, 2}, 0, F32Bytes(8));
  w.Tensor("b.q8", {64, 2}, 8, std::string(2 * 2 * 34, '\x01'));
  return w;
}

TEST(Gguf, GoldenLlamaFiles) {
  REQUIRE_SHARED("golden/families/llama/llama.gguf");
  for (const char* name : {"llama.gguf", "llama-f16.gguf", "llama-q8_0.gguf"}) {
    auto f = GgufFile::Open(Shared(std::string("golden/families/llama/") + name));
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    const GgufFile& g = **f;
    EXPECT_EQ(g.version(), 3u);
    EXPECT_EQ(g.alignment(), 32u);
    EXPECT_EQ(*g.GetString("general.architecture"), "llama");
    EXPECT_EQ(*g.GetInt("llama.block_count"), 2);
    EXPECT_EQ(*g.GetInt("llama.embedding_length"), 64);
    EXPECT_FLOAT_EQ(static_cast<float>(*g.GetFloat("llama.attention.layer_norm_rms_epsilon")),
                    1e-5f);
    EXPECT_TRUE(*g.GetBool("tokenizer.ggml.add_bos_token"));
    EXPECT_EQ(g.GetStringArray("tokenizer.ggml.tokens")->size(), 512u);
    EXPECT_EQ(g.GetFloatArray("tokenizer.ggml.scores")->size(), 512u);
    EXPECT_EQ(g.GetIntArray("tokenizer.ggml.token_type")->at(3), 6);  // <0x00>: a byte token
    EXPECT_EQ(g.tensors().size(), 21u);
    const GgufTensorInfo* embd = g.FindTensor("token_embd.weight");
    ASSERT_NE(embd, nullptr);
    EXPECT_EQ(embd->dims, (std::vector<int64_t>{64, 512}));
    const std::string type = std::string(name) == "llama.gguf"       ? "F32"
                             : std::string(name) == "llama-f16.gguf" ? "F16"
                                                                     : "Q8_0";
    EXPECT_EQ(embd->TypeName(), type);
    const int64_t bytes = type == "F32"   ? 4 * 64 * 512
                          : type == "F16" ? 2 * 64 * 512
                                          : 34 * 2 * 512;
    EXPECT_EQ(embd->nbytes, static_cast<uint64_t>(bytes));
    const GgufTensorInfo* norm = g.FindTensor("output_norm.weight");
    ASSERT_NE(norm, nullptr);
    EXPECT_EQ(norm->TypeName(), "F32");
    EXPECT_GT(std::fabs(static_cast<const float*>(norm->data)[0]), 0.5f);  // 1 + N(0, 0.1)
  }
}

TEST(Gguf, EveryGoldenFileOpens) {
  REQUIRE_SHARED("golden/families");
  int opened = 0;
  for (const auto& e : fs::recursive_directory_iterator(Shared("golden/families"))) {
    if (e.path().extension() != ".gguf") continue;
    EXPECT_TRUE(IsGgufPath(e.path().string()));
    auto f = GgufFile::Open(e.path().string());
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    ++opened;
  }
  EXPECT_GE(opened, 11);
}

TEST(Gguf, AllValueTypesRoundTrip) {
  GgufWriter w;
  w.U32("u32", 4000000000u);
  w.I32("i32", -7);
  w.F32("f32", 0.5f);
  w.Bool("bool", true);
  w.U64("u64", ~uint64_t{0});
  w.F64("f64", -2.25);
  w.Str("str", std::string("a\0b", 3));
  w.RawKv("u8", 0, "\xff");
  w.RawKv("i8", 1, "\xff");
  w.RawKv("u16", 2, std::string("\xff\xff", 2));
  w.RawKv("i16", 3, std::string("\xfe\xff", 2));
  w.RawKv("i64", 11, std::string("\xfd\xff\xff\xff\xff\xff\xff\xff", 8));
  w.I32Array("ints", {1, -2, 3});
  w.F32Array("floats", {1.5f, 2.5f});
  w.StrArray("strs", {"x", "", "yz"});
  // [[1, 2], [3]] as an array of arrays of uint8.
  std::string nested;
  GgufWriter::Pod(&nested, uint32_t{9});
  GgufWriter::Pod(&nested, uint64_t{2});
  GgufWriter::Pod(&nested, uint32_t{0});
  GgufWriter::Pod(&nested, uint64_t{2});
  nested += "\x01\x02";
  GgufWriter::Pod(&nested, uint32_t{0});
  GgufWriter::Pod(&nested, uint64_t{1});
  nested += "\x03";
  w.RawKv("nested", 9, nested);
  auto f = Parse(w.Build());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const GgufFile& g = **f;
  EXPECT_EQ(*g.GetInt("u32"), 4000000000);
  EXPECT_EQ(*g.GetInt("i32"), -7);
  EXPECT_EQ(*g.GetFloat("f32"), 0.5);
  EXPECT_EQ(*g.GetFloat("i32"), -7.0);
  EXPECT_TRUE(*g.GetBool("bool"));
  EXPECT_FALSE(g.GetInt("u64").ok()) << "2^64 - 1 does not fit an int64";
  EXPECT_EQ(*g.GetFloat("f64"), -2.25);
  EXPECT_EQ(*g.GetString("str"), std::string("a\0b", 3));
  EXPECT_EQ(*g.GetInt("u8"), 255);
  EXPECT_EQ(*g.GetInt("i8"), -1);
  EXPECT_EQ(*g.GetInt("u16"), 65535);
  EXPECT_EQ(*g.GetInt("i16"), -2);
  EXPECT_EQ(*g.GetInt("i64"), -3);
  EXPECT_EQ(*g.GetIntArray("ints"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*g.GetFloatArray("floats"), (std::vector<double>{1.5, 2.5}));
  EXPECT_EQ(*g.GetStringArray("strs"), (std::vector<std::string>{"x", "", "yz"}));
  const GgufValue* n = g.Find("nested");
  ASSERT_NE(n, nullptr);
  ASSERT_EQ(n->array_size(), 2u);
  EXPECT_EQ(n->arrays[0].ints, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(n->arrays[1].ints, (std::vector<uint64_t>{3}));
  // Wrong types and missing keys name the key.
  for (auto s : {g.GetString("u32").status(), g.GetInt("str").status(), g.GetBool("u8").status(),
                 g.GetStringArray("ints").status(), g.GetIntArray("floats").status(),
                 g.GetFloatArray("strs").status()}) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("key '"), std::string::npos) << s.ToString();
  }
  EXPECT_EQ(g.GetInt("absent").status().code(), StatusCode::kNotFound);
}

TEST(Gguf, TensorInfosAndAlignment) {
  GgufWriter w = SmallFile();
  auto f = Parse(w.Build());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const GgufTensorInfo* q = (*f)->FindTensor("b.q8");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->TypeName(), "Q8_0");
  EXPECT_EQ(q->nbytes, 2u * 2 * 34);
  EXPECT_EQ(q->offset % 32, 0u);
  EXPECT_EQ(q->ShapeString(), "[64, 2]");
  EXPECT_EQ(static_cast<const uint8_t*>(q->data)[0], 1);
  // A custom alignment is honoured.
  GgufWriter a;
  a.U32("general.alignment", 64);
  a.set_alignment(64);
  a.Tensor("x", {3}, 0, F32Bytes(3));
  a.Tensor("y", {5}, 0, F32Bytes(5));
  auto fa = Parse(a.Build());
  ASSERT_TRUE(fa.ok()) << fa.status().ToString();
  EXPECT_EQ((*fa)->alignment(), 64u);
  EXPECT_EQ((*fa)->FindTensor("y")->offset, 64u);
}

TEST(Gguf, HeaderErrors) {
  std::string good = SmallFile().Build();
  std::string bad = good;
  bad[0] = 'X';
  ExpectError(bad, "not a GGUF file", "magic");
  for (uint32_t v : {1u, 4u, 0x03000000u}) {
    GgufWriter w = SmallFile();
    w.set_version(v);
    ExpectError(w.Build(), "version", "version " + std::to_string(v));
  }
  GgufWriter be = SmallFile();
  be.set_version(0x03000000u);
  ExpectError(be.Build(), "big-endian", "big-endian");
  // Counts far beyond the file.
  bad = good;
  const uint64_t huge = uint64_t{1} << 60;
  std::memcpy(bad.data() + 8, &huge, 8);
  ExpectError(bad, "more than the file", "tensor count");
  bad = good;
  std::memcpy(bad.data() + 16, &huge, 8);
  ExpectError(bad, "more than the file", "kv count");
}

TEST(Gguf, EveryTruncationIsAnError) {
  const std::string good = SmallFile().Build();
  ASSERT_TRUE(Parse(good).ok());
  for (size_t n = 0; n < good.size(); ++n) {
    auto f = Parse(good.substr(0, n));
    ASSERT_FALSE(f.ok()) << "prefix of " << n << " bytes accepted";
    EXPECT_NE(f.status().message().find("test.gguf"), std::string::npos) << f.status().ToString();
  }
}

TEST(Gguf, MetadataErrors) {
  {
    GgufWriter w;
    w.RawKv("k", 13, "");
    ExpectError(w.Build(), "key 'k' has unknown value type 13", "value type");
  }
  {
    GgufWriter w;
    std::string body;
    GgufWriter::Pod(&body, uint64_t{1} << 62);
    w.RawKv("long.string", 8, body + "abc");
    ExpectError(w.Build(), "long.string", "string length");
  }
  {
    GgufWriter w;
    std::string body;
    GgufWriter::Pod(&body, uint32_t{4});
    GgufWriter::Pod(&body, uint64_t{1} << 61);
    w.RawKv("big.array", 9, body + "abcd");
    ExpectError(w.Build(), "key 'big.array': array of", "array count");
  }
  {
    GgufWriter w;
    std::string body;
    GgufWriter::Pod(&body, uint32_t{77});
    GgufWriter::Pod(&body, uint64_t{1});
    w.RawKv("odd.array", 9, body);
    ExpectError(w.Build(), "unknown array element type 77", "element type");
  }
  {
    // Arrays nested 9 deep.
    std::string body;
    for (int i = 0; i < 9; ++i) {
      GgufWriter::Pod(&body, uint32_t{9});
      GgufWriter::Pod(&body, uint64_t{1});
    }
    GgufWriter::Pod(&body, uint32_t{0});
    GgufWriter::Pod(&body, uint64_t{0});
    GgufWriter w;
    w.RawKv("deep", 9, body);
    ExpectError(w.Build(), "nested deeper", "nesting");
  }
  {
    GgufWriter w;
    w.U32("dup", 1);
    w.U32("dup", 2);
    ExpectError(w.Build(), "duplicate metadata key 'dup'", "duplicate key");
  }
  {
    GgufWriter w;
    w.RawKv("flag", 7, "\x02");
    ExpectError(w.Build(), "key 'flag': bool value 2", "bool");
  }
  for (uint32_t a : {0u, 48u}) {
    GgufWriter w;
    w.U32("general.alignment", a);
    ExpectError(w.Build(), "general.alignment", "alignment " + std::to_string(a));
  }
  {
    GgufWriter w;
    w.Str("general.alignment", "32");
    ExpectError(w.Build(), "general.alignment", "alignment type");
  }
}

TEST(Gguf, TensorErrors) {
  {
    GgufWriter w;
    w.Tensor("blk.0.attn_q.weight", {32, 2}, 31, std::string(64, '\0'));
    ExpectError(w.Build(), "tensor 'blk.0.attn_q.weight' has unknown GGML type 31", "type");
  }
  {
    GgufWriter w;
    w.Tensor("t5", {1, 1, 1, 1, 1}, 0, F32Bytes(1));
    ExpectError(w.Build(), "tensor 't5' has 5 dimensions", "rank");
  }
  {
    GgufWriter w;
    w.Tensor("huge", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, "");
    ExpectError(w.Build(), "tensor 'huge': shape", "overflow");
  }
  {
    GgufWriter w;
    w.Tensor("bytes", {uint64_t{1} << 61, 2}, 0, "");
    ExpectError(w.Build(), "tensor 'bytes': size overflows", "byte overflow");
  }
  {
    GgufWriter w;
    w.Tensor("neg", {~uint64_t{0}}, 0, "");
    ExpectError(w.Build(), "tensor 'neg' has a negative dimension", "negative");
  }
  {
    GgufWriter w;
    w.Tensor("q", {48, 2}, 8, std::string(1000, '\0'));
    ExpectError(w.Build(), "tensor 'q' (Q8_0): row length 48", "block");
  }
  {
    GgufWriter w;
    w.Tensor("a", {8}, 0, F32Bytes(8));
    w.Tensor("b", {8}, 0, "", 1 << 20);
    ExpectError(w.Build(), "tensor 'b' (F32 [8], 32 bytes at offset 1048576) lies outside",
                "offset out of range");
  }
  {
    GgufWriter w;
    w.Tensor("a", {8}, 0, F32Bytes(4));  // the data holds half the tensor
    ExpectError(w.Build(), "tensor 'a'", "data too short");
  }
  {
    GgufWriter w;
    w.Tensor("a", {8}, 0, F32Bytes(8));
    w.Tensor("u", {1}, 0, "", 4);
    ExpectError(w.Build(), "tensor 'u': offset 4 is not a multiple of the alignment 32",
                "unaligned");
  }
  {
    GgufWriter w;
    w.Tensor("same", {1}, 0, F32Bytes(1));
    w.Tensor("same", {1}, 0, F32Bytes(1));
    ExpectError(w.Build(), "duplicate tensor 'same'", "duplicate tensor");
  }
}

TEST(Gguf, OpenNamesThePath) {
  const std::string path =
      (fs::temp_directory_path() / ("gguf_test_" + std::to_string(getpid()) + ".gguf")).string();
  std::ofstream(path, std::ios::binary) << "GGUF\x03";
  auto f = GgufFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find(path), std::string::npos) << f.status().ToString();
  EXPECT_TRUE(IsGgufPath(path));
  SmallFile().Write(path);
  EXPECT_TRUE(GgufFile::Open(path).ok());
  fs::remove(path);
  EXPECT_FALSE(IsGgufPath(path));
  EXPECT_FALSE(IsGgufPath(fs::temp_directory_path().string()));
  EXPECT_EQ(GgufFile::Open(path).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace llm::testing
