#include "agent/stack_burst_request.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/memory_host.h"

namespace expanse::agent {
namespace stack_burst_request_test {
namespace {

using ::testing::HasSubstr;

StackBurstRequest Request() {
  return {.job_id = "123_4",
          .slurm_job_id = 130,
          .reason = "stuck",
          .trigger_ms = 1'800'000'000'123,
          .since_ms = 1'799'999'400'000,
          .nonce = "0123456789abcdef"};
}

std::string Reason(std::string_view name, std::string_view bytes) {
  Result<StackBurstRequest> r = DecodeStackBurstRequest(name, bytes);
  return r.ok() ? "accepted" : r.status().reason();
}

TEST(StackBurstRequestTest, RoundTrips) {
  const StackBurstRequest r = Request();
  EXPECT_EQ(StackBurstFileName(r), "burst-1800000000123-0123456789abcdef.json");
  const std::string bytes = EncodeStackBurstRequest(r);
  EXPECT_LE(bytes.size(), kMaxStackBurstRequestBytes);
  Result<StackBurstRequest> back = DecodeStackBurstRequest(StackBurstFileName(r), bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->job_id, "123_4");
  EXPECT_EQ(back->slurm_job_id, 130);
  EXPECT_EQ(back->reason, "stuck");
  EXPECT_EQ(back->trigger_ms, r.trigger_ms);
  EXPECT_EQ(back->since_ms, r.since_ms);
  EXPECT_EQ(back->nonce, r.nonce);
}

TEST(StackBurstRequestTest, NoncesAreFreshHex) {
  const std::string a = NewStackBurstNonce();
  EXPECT_EQ(a.size(), kStackBurstNonceHexDigits);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, NewStackBurstNonce());
}

TEST(StackBurstRequestTest, RefusesHostileNamesAndBodies) {
  const StackBurstRequest r = Request();
  const std::string name = StackBurstFileName(r);
  const std::string good = EncodeStackBurstRequest(r);
  EXPECT_EQ(Reason(name, good), "accepted");
  EXPECT_EQ(Reason("burst-1800000000123-0123456789ABCDEF.json", good), "bad_name");
  EXPECT_EQ(Reason("burst-1800000000123-0123.json", good), "bad_name");
  EXPECT_EQ(Reason("burst--0123456789abcdef.json", good), "bad_name");
  EXPECT_EQ(Reason("burst-99999999999999999999-0123456789abcdef.json", good), "bad_name");
  EXPECT_EQ(Reason("other.json", good), "bad_name");
  EXPECT_EQ(Reason("burst-01800000000123-0123456789abcdef.json", good), "bad_name");
  EXPECT_EQ(Reason("burst-1800000000124-0123456789abcdef.json", good), "nonce_mismatch");
  EXPECT_EQ(Reason("burst-1800000000123-fedcba9876543210.json", good), "nonce_mismatch");
  EXPECT_EQ(Reason(name, std::string(2000, ' ')), "too_large");
  EXPECT_EQ(Reason(name, "not json"), "invalid_json");
  EXPECT_EQ(Reason(name, "[[[[[[1]]]]]]"), "json_too_deep");
  EXPECT_EQ(Reason(name, "[1]"), "bad_request");

  auto with = [&](const char* key, nlohmann::json value) {
    nlohmann::json doc = nlohmann::json::parse(good);
    if (value.is_discarded())
      doc.erase(key);
    else
      doc[key] = value;
    return Reason(name, doc.dump());
  };
  EXPECT_EQ(with("version", 2), "unsupported_format");
  EXPECT_EQ(with("job_id", nlohmann::json::value_t::discarded), "bad_request");
  EXPECT_EQ(with("job_id", "a\nb"), "bad_request");
  EXPECT_EQ(with("job_id", 7), "bad_request");
  EXPECT_EQ(with("reason", "cancel"), "bad_request");
  EXPECT_EQ(with("trigger_ms", "1800000000123"), "bad_request");
  EXPECT_EQ(with("trigger_ms", -1), "bad_request");
  EXPECT_EQ(with("slurm_job_id", -5), "bad_request");
  Result<StackBurstRequest> bad = DecodeStackBurstRequest(name, [&] {
    nlohmann::json doc = nlohmann::json::parse(good);
    doc["reason"] = "cancel";
    return doc.dump();
  }());
  EXPECT_THAT(bad.status().message(), HasSubstr("stack_burst.reason"));
}

TEST(StackBurstRequestTest, WritesOneFilePerHostUnderTheControlTree) {
  MemoryHost host;
  ASSERT_TRUE(host.MakeDirectories("/shared/spool", 0755).ok());
  const std::string root = ControlTreeRoot("/shared");
  EXPECT_EQ(root, "/shared/spool/control");
  const StackBurstRequest r = Request();
  ASSERT_TRUE(WriteStackBurstRequest(host, root, "w1", r).ok());
  ASSERT_TRUE(WriteStackBurstRequest(host, root, "w2", r).ok());
  for (const char* node : {"w1", "w2"}) {
    const std::string path = root + "/" + node + "/" + StackBurstFileName(r);
    Result<std::optional<std::string>> bytes = host.ReadFile(path, 4096);
    ASSERT_TRUE(bytes.ok() && bytes->has_value()) << path;
    EXPECT_EQ(**bytes, EncodeStackBurstRequest(r));
    EXPECT_EQ(host.Stat(path)->mode, 0644u);
  }
  EXPECT_EQ(WriteStackBurstRequest(host, root, "../etc", r).reason(), "bad_host");
  EXPECT_EQ(WriteStackBurstRequest(host, root, ".quarantine", r).reason(), "bad_host");
}

}  // namespace
}  // namespace stack_burst_request_test
}  // namespace expanse::agent
