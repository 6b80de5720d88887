// SafetensorsFile / ModelWeightFiles::ReleaseRange: the pages of a range inside a mapped file
// are given back (the file reads the same afterwards: they come back from the file), and a range
// outside the mapping, or reaching past its end, is refused and left alone: dropping the pages
// of anonymous memory would zero it.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/safetensors.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

// A model.safetensors of one F16 tensor "w" of `count` values i * 7 (mod 65536) in `dir`.
void WriteOneTensor(const fs::path& dir, int64_t count) {
  const std::string header = "{\"w\":{\"dtype\":\"F16\",\"shape\":[" + std::to_string(count) +
                             "],\"data_offsets\":[0," + std::to_string(2 * count) + "]}}";
  std::ofstream out(dir / "model.safetensors", std::ios::binary);
  const uint64_t len = header.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << header;
  for (int64_t i = 0; i < count; ++i) {
    const auto v = static_cast<uint16_t>(i * 7);
    out.write(reinterpret_cast<const char*>(&v), 2);
  }
}

TEST(SafetensorsRelease, RangeInsideTheMappingIsReleasedAndReadsTheSame) {
  const fs::path dir = fs::temp_directory_path() / ("st_release_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const int64_t count = 5 * 4096 + 3;  // several pages
  WriteOneTensor(dir, count);
  auto files = ModelWeightFiles::Open(dir.string());
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  auto view = (*files)->Get("w");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  std::vector<uint16_t> before(count);
  std::memcpy(before.data(), view->data, 2 * count);

  EXPECT_TRUE((*files)->ReleaseRange(view->data, view->nbytes));
  std::vector<uint16_t> after(count);
  std::memcpy(after.data(), view->data, 2 * count);
  EXPECT_EQ(after, before);
  for (int64_t i = 0; i < count; i += 997) EXPECT_EQ(after[i], static_cast<uint16_t>(i * 7));

  std::vector<uint16_t> heap(count, 0x1234);  // not the file's: refused, untouched
  EXPECT_FALSE((*files)->ReleaseRange(heap.data(), 2 * heap.size()));
  EXPECT_EQ(heap[4096], 0x1234);
  // From inside the mapping to past its end: refused.
  EXPECT_FALSE((*files)->ReleaseRange(view->data, view->nbytes + (size_t{1} << 20)));
  files->reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace llm
