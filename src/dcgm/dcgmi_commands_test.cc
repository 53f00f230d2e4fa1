#include "dcgm/dcgmi_commands.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dcgm/dcgm_fields.h"

namespace expanse::dcgm {
namespace dcgmi_commands_test {
namespace {

using ::testing::ElementsAre;

TEST(DcgmiCommandsTest, Defaults) {
  const DcgmiOptions options;
  const std::vector<uint16_t> ids{202, 1002};
  EXPECT_THAT(DmonArgv(options, ids), ElementsAre("dcgmi", "dmon", "--host", "localhost:5555", "-e",
                                                  "202,1002", "-d", "1000"));
  EXPECT_THAT(HealthCheckArgv(options),
              ElementsAre("dcgmi", "health", "--host", "localhost:5555", "-c", "-j"));
  EXPECT_THAT(HealthSetArgv(options),
              ElementsAre("dcgmi", "health", "--host", "localhost:5555", "-s", "a"));
  EXPECT_THAT(DiscoveryArgv(options),
              ElementsAre("dcgmi", "discovery", "--host", "localhost:5555", "-l"));
}

TEST(DcgmiCommandsTest, OperatorsClientAndHost) {
  DcgmiOptions options;
  options.dcgmi = "/opt/dcgm/bin/dcgmi";
  options.host = "unix:///run/nvidia-dcgm.sock";
  options.interval = std::chrono::milliseconds(250);
  const std::vector<std::string> argv = DmonArgv(options, DmonFieldIds(false));
  EXPECT_EQ(argv.front(), "/opt/dcgm/bin/dcgmi");
  EXPECT_EQ(argv[3], "unix:///run/nvidia-dcgm.sock");
  EXPECT_EQ(argv[5], FieldIdList(DmonFieldIds(false)));
  EXPECT_EQ(argv.back(), "250");
}

}  // namespace
}  // namespace dcgmi_commands_test
}  // namespace expanse::dcgm
