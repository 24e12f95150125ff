// fit: the -ngl search.
#include <gtest/gtest.h>

#include "stowage/planner/graph.h"
#include "stowage/planner/fit.h"

namespace stowage::planner {
namespace {

TEST(FitGpuLayers, FindsTheLargestFittingValue) {
  for (int limit : {0, 1, 5, 9}) {
    int calls = 0;
    auto r = FitGpuLayers(9, [&](int ngl, std::string*) -> Result<bool> {
      ++calls;
      return ngl <= limit;
    });
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, limit);
    EXPECT_LE(calls, 6);  // binary search
  }
}

TEST(FitGpuLayers, ReportsWhenNothingFitsAndPropagatesErrors) {
  auto none = FitGpuLayers(9, [](int, std::string* why) -> Result<bool> {
    *why = "does not fit: device X";
    return false;
  });
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(none.status().message(), "--fit: even -ngl 0 does not fit: device X");
  auto err = FitGpuLayers(9, [](int, std::string*) -> Result<bool> { return InvalidArgument("bad"); });
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.status().message(), "bad");
}

}  // namespace
}  // namespace stowage::planner
