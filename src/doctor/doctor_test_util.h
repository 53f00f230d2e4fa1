// A healthy deployment's facts for the doctor's tests: each test breaks one thing.
#ifndef EXPANSE_DOCTOR_DOCTOR_TEST_UTIL_H_
#define EXPANSE_DOCTOR_DOCTOR_TEST_UTIL_H_

#include "doctor/facts.h"

namespace expanse::doctor {

inline constexpr int64_t kNowMs = 1'800'000'000'000;

inline NodeFacts HealthyNode(const std::string& host, uint32_t first_minor) {
  NodeFacts node;
  node.host = host;
  node.written_ms = kNowMs - 5'000;
  node.arrived_ms = kNowMs - 5'000;
  node.last_sample_ms = kNowMs - 6'000;
  node.gpus = {{"GPU-" + host + "-0", first_minor}, {"GPU-" + host + "-1", first_minor + 1}};
  node.capabilities = {
      {"nvml", {"ok", ""}}, {"cupti", {"ok", ""}}, {"dcgm", {"ok", ""}}, {"py_stacks", {"ok", ""}}};
  GpuUseFacts use;
  use.uuid = node.gpus[0].uuid;
  use.jobs = {"42"};
  use.processes = {{1234, "42", true, false}};
  node.gpu_use = {use, {node.gpus[1].uuid, {}, {}}};
  node.gres = GresFacts{"", false, {first_minor, first_minor + 1}, 0};
  return node;
}

inline DeploymentFacts HealthyFacts() {
  DeploymentFacts facts;
  facts.now_ms = kNowMs;
  SlurmConfFacts conf;
  conf.path = "/etc/slurm/slurm.conf";
  conf.hooks = {{"Prolog", true, "/srv/expanse/hooks/prolog", "/etc/slurm/slurm.conf:20", true, ""},
                {"Epilog", true, "/srv/expanse/hooks/epilog", "/etc/slurm/slurm.conf:21", true, ""},
                {"TaskProlog", false, "", "", false, ""}};
  conf.task_plugin = "task/affinity,task/cgroup";
  conf.proctrack_type = "proctrack/cgroup";
  facts.slurm_conf = conf;
  CgroupConfFacts cgroup;
  cgroup.path = "/etc/slurm/cgroup.conf";
  cgroup.present = true;
  cgroup.settings = {{"constraindevices", "yes"}, {"constraincores", "yes"}};
  facts.cgroup_conf = cgroup;
  facts.daemon_user = {"slurm", true, 64030, 64030};
  SpoolFacts spool;
  spool.root = "/srv/expanse/spool/workers";
  spool.dir = {spool.root, true, true, 0755, 64030, 64030};
  spool.host_dirs = {{spool.root + "/w1", true, true, 0700, 64030, 64030},
                     {spool.root + "/w2", true, true, 0700, 64030, 64030}};
  spool.backlog_files = {{"w1", 2}, {"w2", 0}};
  facts.spool = spool;
  facts.nodes = {HealthyNode("w1", 0), HealthyNode("w2", 0)};
  CredentialFacts credential;
  credential.config_path = "/var/lib/slurm/.expanse/config.json";
  credential.compute_id = "cmp_1";
  credential.control_plane = ProbeFacts{"https://cp.example/cp/v1/enrolment", true, 200, "", ""};
  credential.data_plane = ProbeFacts{"https://dp.example/dp/v1/sync", true, 200, "", ""};
  facts.credential = credential;
  facts.disks = {{"/var/lib/expanse", "", 100ull << 30, 50ull << 30},
                 {"/srv/expanse", "", 1000ull << 30, 400ull << 30}};
  facts.outbox = OutboxFacts{"/var/lib/expanse/outbox", "", 64ull << 20, 2ull << 30};
  return facts;
}

}  // namespace expanse::doctor

#endif  // EXPANSE_DOCTOR_DOCTOR_TEST_UTIL_H_
