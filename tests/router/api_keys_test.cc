// API keys: sources, the Bearer header, constant-time comparison, and the default bind address.
#include "router/api_keys.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace llm::router {
namespace {

TEST(ApiKeys, NoKeysMeansNoAuthentication) {
  auto keys = ApiKeys::Load({}, "", nullptr);
  ASSERT_TRUE(keys.ok());
  EXPECT_FALSE(keys->enabled());
  EXPECT_TRUE(keys->Accepts(""));
  EXPECT_TRUE(keys->Accepts("Bearer anything"));
  EXPECT_FALSE(ApiKeys::Load({}, "", "  ")->enabled());  // a blank LLM_API_KEY is no key
}

TEST(ApiKeys, AcceptsOnlyABearerWithAConfiguredKey) {
  const ApiKeys keys({"sk-config", "sk-second"});
  EXPECT_TRUE(keys.Accepts("Bearer sk-config"));
  EXPECT_TRUE(keys.Accepts("bearer sk-second"));  // the scheme is case-insensitive
  EXPECT_TRUE(keys.Accepts("Bearer  sk-second "));
  EXPECT_FALSE(keys.Accepts(""));
  EXPECT_FALSE(keys.Accepts("Bearer "));
  EXPECT_FALSE(keys.Accepts("Bearer sk-confi"));
  EXPECT_FALSE(keys.Accepts("Bearer sk-configx"));
  EXPECT_FALSE(keys.Accepts("Bearer SK-CONFIG"));  // keys are case-sensitive
  EXPECT_FALSE(keys.Accepts("Basic sk-config"));
  EXPECT_FALSE(keys.Accepts("sk-config"));
}

TEST(ApiKeys, ConstantTimeEqualsIsEquality) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_FALSE(ConstantTimeEquals("", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", ""));
  EXPECT_FALSE(ConstantTimeEquals("abd", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abcabc", "abc"));  // repeats of the secret are not it
  EXPECT_FALSE(ConstantTimeEquals("a", "aaa"));
}

TEST(ApiKeys, KeyFileAndEnvironmentAddToTheConfigKeys) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("api_keys_test_" + std::to_string(getpid()) + ".txt"))
                               .string();
  {
    std::ofstream f(path);
    f << "# operator keys\n\nsk-file-1\n  sk-file-2  \n";
  }
  auto keys = ApiKeys::Load({"sk-config"}, path, "sk-env");
  std::filesystem::remove(path);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(keys->size(), 4u);
  for (const char* k : {"sk-config", "sk-file-1", "sk-file-2", "sk-env"}) {
    EXPECT_TRUE(keys->Accepts(std::string("Bearer ") + k)) << k;
  }
  EXPECT_FALSE(keys->Accepts("Bearer # operator keys"));
}

TEST(ApiKeys, UnreadableOrEmptyKeyFileIsAnError) {
  auto missing = ApiKeys::Load({}, "/nonexistent/keys.txt", nullptr);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("router.api_key_file"), std::string::npos);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("api_keys_empty_" + std::to_string(getpid()) + ".txt"))
                               .string();
  { std::ofstream(path) << "# nothing yet\n"; }
  auto empty = ApiKeys::Load({}, path, nullptr);
  std::filesystem::remove(path);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("holds no key"), std::string::npos);
}

TEST(ApiKeys, DefaultBindAddressIsLoopbackWithoutAKey) {
  EXPECT_EQ(BindHost("", ApiKeys()), "127.0.0.1");
  EXPECT_EQ(BindHost("", ApiKeys({"k"})), "0.0.0.0");
  EXPECT_EQ(BindHost("0.0.0.0", ApiKeys()), "0.0.0.0");  // explicit: kept (with a warning)
  EXPECT_EQ(BindHost("10.0.0.5", ApiKeys({"k"})), "10.0.0.5");
}

}  // namespace
}  // namespace llm::router
