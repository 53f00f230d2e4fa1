#include "server/heartbeat.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace expanse::server {
namespace heartbeat_test {
namespace {

TEST(HeartbeatTest, AcceptsAFullDocument) {
  auto s = ValidateHeartbeat(R"({
    "version": 1, "daemon_version": "0.1.0", "controller_host": "ctl",
    "nodes": [{"name": "worker1", "gpus": [{"index": 0, "minor": 2, "uuid": "GPU-1",
               "model": "NVIDIA H200", "memory_total_mib": 143771, "driver": "570.86",
               "use": {"state": "unallocated_in_use", "jobs": [],
                       "processes": [{"pid": 42, "job_id": "7", "used_memory_mib": 900,
                                      "of_allocated_job": false, "outside_cgroup": true}]}}]},
              {"name": "worker2"}],
    "capabilities": {"nvml": {"state": "ok"}, "cupti": {"state": "absent", "reason": "no helper"}},
    "workers": {"sampled": 1, "expected": 2, "reports": [{"host": "worker1",
                "last_sample_ms": 5, "capabilities": {"py_stacks": {"state": "degraded",
                "reason": "py_stacks: ptrace denied for pid 7: EPERM"}}}]},
    "outbox": {"depth_batches": 3, "dropped_records": 0},
    "diagnostics": {"anything": ["goes", 1]}})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->nodes, 2);
  EXPECT_EQ(s->gpus, 1);
  EXPECT_EQ(s->controller_host, "ctl");
  EXPECT_EQ(s->normalized_json.find('\n'), std::string::npos);
}

struct BadCase {
  const char* body;
  const char* reason;
  const char* names;  // part of the message that names the field
};

class HeartbeatRejectsTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(HeartbeatRejectsTest, NamesTheField) {
  auto s = ValidateHeartbeat(GetParam().body);
  ASSERT_FALSE(s.ok()) << GetParam().body;
  EXPECT_EQ(s.status().reason(), GetParam().reason);
  EXPECT_NE(s.status().message().find(GetParam().names), std::string::npos) << s.status();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HeartbeatRejectsTest,
    ::testing::Values(
        BadCase{"", "invalid_json", "not valid JSON"},
        BadCase{"{\"version\":1", "invalid_json", "not valid JSON"},
        BadCase{"{\"version\":1,\"daemon_version\":\"\xff\"}", "invalid_json", "UTF-8"},
        BadCase{"[]", "invalid_heartbeat", "JSON object"},
        BadCase{R"({"version":2})", "invalid_heartbeat", "version"},
        BadCase{R"({"version":1,"controller_host":"c"})", "invalid_heartbeat", "daemon_version"},
        BadCase{R"({"version":1,"daemon_version":"1","controller_host":"a b"})",
                "invalid_heartbeat", "controller_host"},
        BadCase{
            R"({"version":1,"daemon_version":"1","controller_host":"c","nodes":[{"name":"w","gpus":[{"uuid":"g","memory_total_mib":-1}]}]})",
            "invalid_heartbeat", "nodes[0].gpus[0].memory_total_mib"},
        BadCase{
            R"({"version":1,"daemon_version":"1","controller_host":"c","capabilities":{"nvml":{"state":"great"}}})",
            "invalid_heartbeat", "capabilities.nvml.state"},
        BadCase{
            R"({"version":1,"daemon_version":"1","controller_host":"c","capabilities":{"quantum":{"state":"ok"}}})",
            "invalid_heartbeat", "capabilities.quantum"},
        BadCase{
            R"({"version":1,"daemon_version":"1","controller_host":"c","outbox":{"depth":"x"}})",
            "invalid_heartbeat", "outbox.depth"},
        BadCase{
            R"({"version":1,"daemon_version":"1","controller_host":"c","nodes":[{"name":"w","gpus":[{"uuid":"g","use":{"state":"asleep"}}]}]})",
            "invalid_heartbeat", "nodes[0].gpus[0].use.state"},
        BadCase{
            R"({"version":1,"daemon_version":"1","controller_host":"c","nodes":[{"name":"w","gpus":[{"uuid":"g","use":{"state":"busy","jobs":[7]}}]}]})",
            "invalid_heartbeat", "nodes[0].gpus[0].use.jobs[0]"},
        BadCase{
            R"({"version":1,"daemon_version":"1","controller_host":"c","nodes":[{"name":"w","gpus":[{"uuid":"g","use":{"state":"busy","processes":[{"job_id":"7"}]}}]}]})",
            "invalid_heartbeat", "nodes[0].gpus[0].use.processes[0].pid"},
        BadCase{
            R"({"version":1,"daemon_version":"1","controller_host":"c","nodes":[{"name":"w","gpus":[{"uuid":"g","use":{"state":"busy","processes":[{"pid":1,"outside_cgroup":"yes"}]}}]}]})",
            "invalid_heartbeat", "nodes[0].gpus[0].use.processes[0].outside_cgroup"},
        BadCase{
            R"({"version":1,"daemon_version":"a'; DROP TABLE x;--\u0001","controller_host":"c"})",
            "invalid_heartbeat", "daemon_version"},
        BadCase{R"({"version":1,"daemon_version":"1","controller_host":"c","x":[[[[[[[[[[[[[[[[)"
                R"([[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]})",
                "json_too_deep", "heartbeat: the document nests arrays and objects deeper than 32"},
        BadCase{R"({"version":1,"daemon_version":"1","controller_host":"c","outbox":{)"
                R"("a_counter_name_that_goes_on_and_on_for_more_than_sixty_four_bytes_x":1}})",
                "invalid_heartbeat", "outbox has a counter name longer than 64 bytes"}));

// Unknown fields, at the top and inside the known objects, are stored only while small: each
// at most 1 KiB, 16 KiB in all, the rest dropped (docs/formats/heartbeat.md).
TEST(HeartbeatTest, StoresOnlySmallUnknownFields) {
  nlohmann::json doc = {
      {"version", 1},
      {"daemon_version", "0.1.0"},
      {"controller_host", "ctl"},
      {"nodes",
       {{{"name", "w1"},
         {"rack", "r7"},
         {"blob", std::string(2000, 'b')},
         {"gpus",
          {{{"uuid", "GPU-1"},
            {"sku", "h200"},
            {"use", {{"state", "free"}, {"huge", std::string(5000, 'h')}}}}}}}}},
      {"workers",
       {{"sampled", 1}, {"reports", {{{"host", "w1"}, {"zone", std::string(1100, 'z')}}}}}},
      {"future", {{"small", true}}},
      {"outbox", {{"depth_batches", 1}}}};
  // 20 fields of ~850 bytes: the first ones fit in the 16 KiB budget, the rest do not.
  for (int i = 0; i < 20; ++i)
    doc["pad" + std::to_string(100 + i)] = std::string(850, 'p');
  auto s = ValidateHeartbeat(doc.dump());
  ASSERT_TRUE(s.ok()) << s.status();
  const nlohmann::json stored = nlohmann::json::parse(s->normalized_json);
  EXPECT_EQ(stored["nodes"][0]["rack"], "r7");
  EXPECT_FALSE(stored["nodes"][0].contains("blob"));
  EXPECT_EQ(stored["nodes"][0]["gpus"][0]["sku"], "h200");
  EXPECT_FALSE(stored["nodes"][0]["gpus"][0]["use"].contains("huge"));
  EXPECT_EQ(stored["nodes"][0]["gpus"][0]["use"]["state"], "free");
  EXPECT_FALSE(stored["workers"]["reports"][0].contains("zone"));
  EXPECT_EQ(stored["future"]["small"], true);
  EXPECT_EQ(stored["outbox"]["depth_batches"], 1);
  int pads = 0;
  for (int i = 0; i < 20; ++i)
    pads += stored.contains("pad" + std::to_string(100 + i)) ? 1 : 0;
  EXPECT_GT(pads, 10);
  EXPECT_LT(pads, 20);
  EXPECT_FALSE(stored.contains("pad119"));  // kept in key order until the budget ran out
  EXPECT_LT(s->normalized_json.size(), 20u * 1024);
}

}  // namespace
}  // namespace heartbeat_test
}  // namespace expanse::server
