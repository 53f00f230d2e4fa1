#include "server/heartbeat.h"

#include <string>

#include <gtest/gtest.h>

namespace expanse::server {
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
            "invalid_heartbeat", "daemon_version"}));

}  // namespace
}  // namespace expanse::server
