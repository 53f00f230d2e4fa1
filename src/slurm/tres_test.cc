#include "slurm/tres.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace expanse::slurm::tres {
namespace tres_test {
namespace {

using Counts = std::map<std::string, int64_t>;

TEST(TresCountsTest, ParsesTotalsWithMemoryInMib) {
  EXPECT_EQ(ParseTresCounts("cpu=4,mem=1G,node=2,billing=4,gres/gpu=4"),
            (Counts{{"billing", 4}, {"cpu", 4}, {"gres/gpu", 4}, {"mem", 1024}, {"node", 2}}));
  EXPECT_EQ(ParseTresCounts("mem=1000M"), (Counts{{"mem", 1000}}));
  EXPECT_EQ(ParseTresCounts("mem=1.5G"), (Counts{{"mem", 1536}}));
  EXPECT_EQ(ParseTresCounts("mem=2T"), (Counts{{"mem", 2 * 1024 * 1024}}));
  EXPECT_EQ(ParseTresCounts("mem=1536K"), (Counts{{"mem", 2}}));  // rounded up
  EXPECT_EQ(ParseTresCounts("mem=300"), (Counts{{"mem", 300}}));
  EXPECT_EQ(ParseTresCounts(""), Counts{});
}

TEST(TresCountsTest, SkipsItemsThatDoNotParse) {
  EXPECT_EQ(ParseTresCounts("cpu=x,mem=-1G,=3,node,gres/gpu=2"), (Counts{{"gres/gpu", 2}}));
}

TEST(TresCountsTest, FindsGpusUntypedOrTyped) {
  EXPECT_EQ(GpusInTresCounts(ParseTresCounts("cpu=2,gres/gpu=4")), 4);
  // The untyped total wins over the typed parts it already counts.
  EXPECT_EQ(GpusInTresCounts(ParseTresCounts("gres/gpu=4,gres/gpu:a100=4")), 4);
  EXPECT_EQ(GpusInTresCounts(ParseTresCounts("gres/gpu:a100=2,gres/gpu:v100=1")), 3);
  EXPECT_EQ(GpusInTresCounts(ParseTresCounts("cpu=2,mem=1G,gres/gpumem=8")), std::nullopt);
}

TEST(TresPerTest, CountsGpusInEveryForm) {
  EXPECT_EQ(GpusInTresPer("gres:gpu:2"), 2);       // 22.05
  EXPECT_EQ(GpusInTresPer("gres/gpu:2"), 2);       // later releases
  EXPECT_EQ(GpusInTresPer("gres:gpu:a100:3"), 3);  // typed
  EXPECT_EQ(GpusInTresPer("gres:gpu"), 1);         // no count
  EXPECT_EQ(GpusInTresPer("gres:gpu:a100"), 1);    // type, no count
  EXPECT_EQ(GpusInTresPer("gpu:2"), 2);            // without the gres prefix
  EXPECT_EQ(GpusInTresPer("gres:gpu:a100:1,gres:gpu:v100:2,gres:mps:100"), 3);
  EXPECT_EQ(GpusInTresPer("gres:mps:100"), std::nullopt);
  EXPECT_EQ(GpusInTresPer(""), std::nullopt);
  EXPECT_EQ(GpusInTresPer("gres:gpu:a100:x"), std::nullopt);
}

}  // namespace
}  // namespace tres_test
}  // namespace expanse::slurm::tres
