#include "slurm/gres.h"

#include <vector>

#include <gtest/gtest.h>

namespace expanse::slurm {
namespace gres_test {
namespace {

using Indices = std::vector<int>;

TEST(GresIndexListTest, ParsesNumbersAndRanges) {
  EXPECT_EQ(*ParseGresIndexList("0"), Indices{0});
  EXPECT_EQ(*ParseGresIndexList("0-1"), (Indices{0, 1}));
  EXPECT_EQ(*ParseGresIndexList("0-1,3"), (Indices{0, 1, 3}));
  EXPECT_EQ(*ParseGresIndexList("5,2-3,3"), (Indices{2, 3, 5}));
  EXPECT_EQ(*ParseGresIndexList(""), Indices{});
  EXPECT_EQ(*ParseGresIndexList("N/A"), Indices{});
}

TEST(GresIndexListTest, RejectsBadRanges) {
  EXPECT_EQ(ParseGresIndexList("0-x").status().message(),
            "GPU index list \"0-x\": bad range \"0-x\"");
  EXPECT_EQ(ParseGresIndexList("3-1").status().message(),
            "GPU index list \"3-1\": bad range \"3-1\"");
  EXPECT_EQ(ParseGresIndexList("0,,1").status().message(),
            "GPU index list \"0,,1\": bad range \"\"");
  EXPECT_EQ(ParseGresIndexList("-1").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseGresIndexList("0-99999").status().message(),
            "GPU index list \"0-99999\": bad range \"0-99999\"");
}

TEST(GpuIndicesFromGresTest, ReadsGpuItemsOnly) {
  EXPECT_EQ(*GpuIndicesFromGres("gpu:2(IDX:0-1)"), (Indices{0, 1}));
  EXPECT_EQ(*GpuIndicesFromGres("gpu:1(IDX:1)"), Indices{1});
  EXPECT_EQ(*GpuIndicesFromGres("gpu:a100:3(IDX:0-1,3)"), (Indices{0, 1, 3}));
  EXPECT_EQ(*GpuIndicesFromGres("gpu:a100:1(IDX:0),gpu:v100:1(IDX:2)"), (Indices{0, 2}));
  EXPECT_EQ(*GpuIndicesFromGres("mps:100(0/100),gpu:1(IDX:4)"), Indices{4});
  EXPECT_EQ(*GpuIndicesFromGres("gpu(IDX:0-1)"), (Indices{0, 1}));
  EXPECT_EQ(*GpuIndicesFromGres("gpu:1(IDX:N/A)"), Indices{});
  EXPECT_EQ(*GpuIndicesFromGres(""), Indices{});
  EXPECT_EQ(*GpuIndicesFromGres("(null)"), Indices{});
  EXPECT_EQ(*GpuIndicesFromGres("gpu:2"), Indices{});
}

TEST(GpuIndicesFromGresTest, RejectsMalformedGres) {
  EXPECT_EQ(GpuIndicesFromGres("gpu:2(IDX:0-1").status().message(),
            "GRES \"gpu:2(IDX:0-1\": '(' without ')'");
  EXPECT_EQ(GpuIndicesFromGres("gpu:2(IDX:0-1))").status().message(),
            "GRES \"gpu:2(IDX:0-1))\": unbalanced parentheses");
  EXPECT_EQ(GpuIndicesFromGres("gpu:2(0-1)").status().message(),
            "GRES \"gpu:2(0-1)\": expected \"(IDX:...)\"");
  EXPECT_EQ(GpuIndicesFromGres("gpu:2(IDX:0)x").status().message(),
            "GRES \"gpu:2(IDX:0)x\": text after ')'");
  EXPECT_EQ(GpuIndicesFromGres("gpu:2(IDX:0-x)").status().message(),
            "GPU index list \"0-x\": bad range \"0-x\"");
}

}  // namespace
}  // namespace gres_test
}  // namespace expanse::slurm
