// llm-admin's text forms: durations, percentages, aligned fields and padded tables.
#include "tools/admin_text.h"

#include <gtest/gtest.h>

namespace llm::admin {
namespace {

TEST(AdminText, DurationIsHoursMinutesSeconds) {
  EXPECT_EQ(Duration(3723.4), "1h02m03s");
  EXPECT_EQ(Duration(36000), "10h00m00s");
  EXPECT_EQ(Duration(65), "1m05s");
  EXPECT_EQ(Duration(7.9), "7s");
  EXPECT_EQ(Duration(0), "0s");
  EXPECT_EQ(Duration(-3), "0s");
}

TEST(AdminText, PercentHasOneDecimal) {
  EXPECT_EQ(Percent(3, 512), "0.6%");
  EXPECT_EQ(Percent(1, 2), "50.0%");
  EXPECT_EQ(Percent(5, 0), "0.0%");
}

TEST(AdminText, FieldsAndTablesAreAligned) {
  EXPECT_EQ(FormatFields({{"model", "m"}, {"KV cache", "1 / 2"}}),
            "model:     m\n"
            "KV cache:  1 / 2\n");
  EXPECT_EQ(FormatTable({{"rank", "host", "status"}, {"0", "node-long", "ok"}}),
            "rank  host       status\n"
            "0     node-long  ok\n");
}

}  // namespace
}  // namespace llm::admin
