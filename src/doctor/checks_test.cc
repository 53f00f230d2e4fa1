#include "doctor/checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "doctor/doctor_test_util.h"

namespace expanse::doctor {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> Codes(const std::vector<Finding>& findings) {
  std::vector<std::string> codes;
  for (const Finding& f : findings)
    codes.push_back(f.code);
  return codes;
}

// The one finding a broken setup must give, with its host and words in its text and fix.
Finding Only(const std::vector<Finding>& findings, const std::string& code) {
  EXPECT_EQ(Codes(findings), std::vector<std::string>{code});
  return findings.empty() ? Finding{} : findings.front();
}

// The first finding with `code`, which must be there.
Finding Named(const std::vector<Finding>& findings, const std::string& code) {
  for (const Finding& f : findings) {
    if (f.code == code)
      return f;
  }
  ADD_FAILURE() << "no " << code << " finding";
  return Finding{};
}

TEST(DoctorChecks, HealthyDeploymentHasNothingToDo) {
  const std::vector<Finding> findings = RunChecks(HealthyFacts());
  EXPECT_THAT(Codes(findings), ::testing::IsEmpty());
  EXPECT_EQ(ExitStatusFor(findings), 0);
}

TEST(DoctorChecks, PrologMissing) {
  DeploymentFacts facts = HealthyFacts();
  facts.slurm_conf->hooks[0] = {"Prolog", true, "", "", false, ""};
  const Finding f = Only(RunChecks(facts), "HOOK_MISSING");
  EXPECT_EQ(f.severity, Severity::kAction);
  EXPECT_THAT(f.seen, HasSubstr("no Prolog= line in /etc/slurm/slurm.conf"));
  EXPECT_THAT(f.fix, HasSubstr("expanse compute install --reinstall"));
  EXPECT_THAT(f.fix, HasSubstr("scontrol reconfigure"));
  EXPECT_EQ(ExitStatusFor(RunChecks(facts)), 1);
}

TEST(DoctorChecks, PrologReplacedBySiteHook) {
  DeploymentFacts facts = HealthyFacts();
  facts.slurm_conf->hooks[0] = {"Prolog", true, "/etc/slurm/site-prolog", "/etc/slurm/slurm.conf:3",
                                false,    ""};
  const Finding f = Only(RunChecks(facts), "HOOK_MISSING");
  EXPECT_THAT(f.seen, HasSubstr("Prolog=\"/etc/slurm/site-prolog\" at /etc/slurm/slurm.conf:3"));
}

TEST(DoctorChecks, HookOrderWrongALaterAssignmentWins) {
  DeploymentFacts facts = HealthyFacts();
  facts.slurm_conf->hooks[1] = {"Epilog",
                                true,
                                "/etc/slurm/site-epilog",
                                "/etc/slurm/conf.d/local.conf:7",
                                false,
                                "/etc/slurm/slurm.conf:21"};
  const Finding f = Only(RunChecks(facts), "HOOK_OVERRIDDEN");
  EXPECT_THAT(f.seen, HasSubstr("wired to Expanse at /etc/slurm/slurm.conf:21"));
  EXPECT_THAT(f.seen, HasSubstr("/etc/slurm/conf.d/local.conf:7"));
  EXPECT_THAT(f.fix, HasSubstr("remove the later Epilog= line at /etc/slurm/conf.d/local.conf:7"));
}

TEST(DoctorChecks, TaskPrologJudgedOnlyWhenTheProfilingAgentWantsIt) {
  DeploymentFacts facts = HealthyFacts();
  facts.slurm_conf->hooks[2].wanted = true;
  EXPECT_EQ(Codes(RunChecks(facts)), std::vector<std::string>{"HOOK_MISSING"});
}

TEST(DoctorChecks, SlurmConfUnreadable) {
  DeploymentFacts facts = HealthyFacts();
  facts.slurm_conf = SlurmConfFacts{};
  facts.slurm_conf->error = "no slurm.conf found";
  const Finding f = Only(RunChecks(facts), "SLURM_CONF_UNREADABLE");
  EXPECT_THAT(f.fix, HasSubstr("--slurm-conf"));
}

TEST(DoctorChecks, TaskPluginAndProctrackWithoutCgroup) {
  DeploymentFacts facts = HealthyFacts();
  facts.slurm_conf->task_plugin = "task/affinity";
  facts.slurm_conf->proctrack_type = "proctrack/linuxproc";
  EXPECT_EQ(Codes(RunChecks(facts)),
            (std::vector<std::string>{"SLURM_TASK_CGROUP_OFF", "SLURM_PROCTRACK_NOT_CGROUP"}));
}

TEST(DoctorChecks, ConstrainDevicesOff) {
  DeploymentFacts facts = HealthyFacts();
  facts.cgroup_conf->settings["constraindevices"] = "no";
  const Finding f = Only(RunChecks(facts), "CGROUP_CONSTRAIN_DEVICES_OFF");
  EXPECT_THAT(f.seen, HasSubstr("ConstrainDevices=\"no\" in /etc/slurm/cgroup.conf"));
  EXPECT_THAT(f.fix, HasSubstr("ConstrainDevices=yes"));
}

TEST(DoctorChecks, CgroupConfMissing) {
  DeploymentFacts facts = HealthyFacts();
  facts.cgroup_conf->present = false;
  facts.cgroup_conf->settings.clear();
  const Finding f = Only(RunChecks(facts), "CGROUP_CONSTRAIN_DEVICES_OFF");
  EXPECT_THAT(f.seen, HasSubstr("does not exist"));
}

TEST(DoctorChecks, GresMinorWrongAgainstTheSamplersGpus) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[1].gres->minors = {0, 2};  // the node has /dev/nvidia0 and /dev/nvidia1
  const Finding f = Only(RunChecks(facts), "GRES_MINOR_MISMATCH");
  EXPECT_EQ(f.host, "w2");
  EXPECT_THAT(f.seen, HasSubstr("only in gres.conf: 2; only on the node: 1"));
  EXPECT_THAT(f.fix, HasSubstr("File=/dev/nvidia"));
}

TEST(DoctorChecks, GpuCountMismatch) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[0].gpus.push_back({"GPU-w1-2", 2});
  const std::vector<Finding> findings = RunChecks(facts);
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings[0].code, "GRES_GPU_COUNT_MISMATCH");
  EXPECT_THAT(findings[0].seen, HasSubstr("gives w1 2 GPUs; the sampler sees 3"));
}

TEST(DoctorChecks, GresAutoDetectHasNothingToCompare) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[0].gres = GresFacts{"", true, {}, 0};
  EXPECT_THAT(Codes(RunChecks(facts)), ::testing::IsEmpty());
}

TEST(DoctorChecks, DuplicateGpuUuidAcrossNodes) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[1].gpus[0].uuid = facts.nodes[0].gpus[0].uuid;
  const Finding f = Only(RunChecks(facts), "GPU_UUID_DUPLICATE");
  EXPECT_THAT(f.seen, HasSubstr("both w1 and w2"));
}

TEST(DoctorChecks, WorkerSilent) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[0].arrived_ms = kNowMs - 15 * 60 * 1000;
  facts.nodes[0].written_ms = *facts.nodes[0].arrived_ms;
  facts.nodes[0].last_sample_ms = *facts.nodes[0].arrived_ms;
  const Finding f = Only(RunChecks(facts), "WORKER_SILENT");
  EXPECT_EQ(f.host, "w1");
  EXPECT_THAT(f.seen, HasSubstr("last reported 15 min ago"));
  EXPECT_THAT(f.fix, HasSubstr("systemctl restart expanse-sampler"));
}

TEST(DoctorChecks, ClockTenMinutesOffIsSkewNotSilence) {
  DeploymentFacts facts = HealthyFacts();
  NodeFacts& node = facts.nodes[1];
  node.written_ms = *node.arrived_ms - 10 * 60 * 1000;  // the worker's clock is behind
  node.last_sample_ms = node.written_ms - 1000;
  const Finding f = Only(RunChecks(facts), "WORKER_CLOCK_SKEW");
  EXPECT_EQ(f.host, "w2");
  EXPECT_THAT(f.seen, HasSubstr("10 min behind"));
  EXPECT_THAT(f.fix, HasSubstr("timedatectl set-ntp true"));
}

TEST(DoctorChecks, ClockAheadIsSkewToo) {
  DeploymentFacts facts = HealthyFacts();
  NodeFacts& node = facts.nodes[1];
  node.written_ms = *node.arrived_ms + 10 * 60 * 1000;
  node.last_sample_ms = node.written_ms - 1000;
  EXPECT_THAT(Only(RunChecks(facts), "WORKER_CLOCK_SKEW").seen, HasSubstr("10 min ahead"));
}

TEST(DoctorChecks, ReportingButNotSampling) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[0].last_sample_ms = 0;
  EXPECT_THAT(Only(RunChecks(facts), "WORKER_NOT_SAMPLING").seen, HasSubstr("no GPU sample yet"));
}

TEST(DoctorChecks, DcgmUnreachable) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[0].capabilities["dcgm"] = {"degraded", "dcgmi cannot reach the host engine"};
  const Finding f = Only(RunChecks(facts), "DCGM_DEGRADED");
  EXPECT_EQ(f.host, "w1");
  EXPECT_THAT(f.seen, HasSubstr("\"dcgmi cannot reach the host engine\""));
  EXPECT_THAT(f.fix, HasSubstr("nvidia-dcgm"));
}

// The fixes say what the operator guide says: keep the driver's profiling restriction and grant
// the service CAP_PERFMON; managed directories repair themselves, site-owned ones do not.
TEST(DoctorChecks, CountersAndPermissionFixesFollowTheGuide) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[0].capabilities["cupti"] = {"degraded",
                                          "CUPTI PM sampling unavailable: "
                                          "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"};
  const Finding cupti = Only(RunChecks(facts), "CUPTI_DEGRADED");
  EXPECT_THAT(cupti.fix, HasSubstr("CAP_PERFMON"));
  EXPECT_THAT(cupti.fix, HasSubstr("RmProfilingAdminOnly=1 kept"));
  EXPECT_THAT(cupti.fix, Not(HasSubstr("RestrictProfilingToAdminUsers=0")));
  facts = HealthyFacts();
  facts.nodes[0].capabilities["profiling_permissions"] = {
      "degraded", "missing o+x on /srv/expanse (the shared-prefix root)"};
  const Finding permissions = Only(RunChecks(facts), "PROFILING_PERMISSIONS_DEGRADED");
  EXPECT_THAT(permissions.fix, HasSubstr("configuration management"));
  EXPECT_THAT(permissions.fix, Not(HasSubstr("--reinstall")));
}

TEST(DoctorChecks, CollectorTurnedOffIsANoteNotAnAction) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[0].capabilities["cupti"] = {"disabled", "EXPANSE_CUPTI_ENABLE=0"};
  facts.nodes[0].capabilities["some_future_thing"] = {"degraded", "?"};
  facts.nodes[0].capabilities["nvidia_smi"] = {"absent", "not used: the nvml backend is active"};
  const std::vector<Finding> findings = RunChecks(facts);
  EXPECT_EQ(Codes(findings), std::vector<std::string>{"CAPABILITY_OFF"});
  EXPECT_EQ(findings[0].severity, Severity::kInfo);
  EXPECT_EQ(ExitStatusFor(findings), 0);
}

TEST(DoctorChecks, SpoolUnwritableByTheDaemonUser) {
  DeploymentFacts facts = HealthyFacts();
  facts.spool->dir.mode = 0555;
  const Finding f = Only(RunChecks(facts), "SPOOL_NOT_WRITABLE");
  EXPECT_THAT(f.seen, HasSubstr("/srv/expanse/spool/workers (mode 0555, uid 64030)"));
  EXPECT_THAT(f.fix, HasSubstr("chown slurm /srv/expanse/spool/workers"));
}

TEST(DoctorChecks, SpoolHostDirectoryOwnedBySomeoneElse) {
  DeploymentFacts facts = HealthyFacts();
  facts.spool->host_dirs[1].uid = 0;
  facts.spool->host_dirs[1].gid = 0;
  EXPECT_THAT(Only(RunChecks(facts), "SPOOL_NOT_WRITABLE").seen,
              HasSubstr("/srv/expanse/spool/workers/w2"));
}

TEST(DoctorChecks, SpoolMissingAndDaemonUserMissing) {
  DeploymentFacts facts = HealthyFacts();
  facts.spool->dir.exists = false;
  facts.spool->dir.is_directory = false;
  facts.daemon_user.found = false;
  EXPECT_EQ(Codes(RunChecks(facts)),
            (std::vector<std::string>{"DAEMON_USER_MISSING", "SPOOL_MISSING"}));
}

TEST(DoctorChecks, QuarantineNotEmpty) {
  DeploymentFacts facts = HealthyFacts();
  facts.spool->quarantined = 3;
  const Finding f = Only(RunChecks(facts), "SPOOL_QUARANTINE");
  EXPECT_THAT(f.seen, HasSubstr("3 refused entries"));
  EXPECT_THAT(f.fix, HasSubstr("ls /srv/expanse/spool/workers/.quarantine"));
}

TEST(DoctorChecks, SpoolBacklog) {
  DeploymentFacts facts = HealthyFacts();
  facts.spool->backlog_files["w2"] = 5000;
  const Finding f = Only(RunChecks(facts), "SPOOL_BACKLOG");
  EXPECT_EQ(f.host, "w2");
}

TEST(DoctorChecks, CredentialRevoked) {
  DeploymentFacts facts = HealthyFacts();
  facts.credential->control_plane->status = 401;
  facts.credential->control_plane->code = "credential_revoked";
  facts.credential->data_plane->status = 401;
  facts.credential->data_plane->code = "credential_revoked";
  const Finding f = Only(RunChecks(facts), "CREDENTIAL_REVOKED");
  EXPECT_THAT(f.seen, HasSubstr("HTTP 401"));
  EXPECT_THAT(f.fix, HasSubstr("expanse compute install --reinstall"));
  EXPECT_THAT(f.fix, HasSubstr("EXPANSE_INSTALL_TOKEN"));
}

TEST(DoctorChecks, CredentialConfigUnreadable) {
  DeploymentFacts facts = HealthyFacts();
  facts.credential = CredentialFacts{};
  facts.credential->config_path = "/var/lib/slurm/.expanse/config.json";
  facts.credential->error = "mode 0644: readable by others";
  EXPECT_THAT(Only(RunChecks(facts), "CREDENTIAL_CONFIG_UNREADABLE").seen, HasSubstr("mode 0644"));
}

TEST(DoctorChecks, PlanesUnreachable) {
  DeploymentFacts facts = HealthyFacts();
  facts.credential->control_plane =
      ProbeFacts{"https://cp.example/cp/v1/enrolment", false, 0, "", "connection refused"};
  facts.credential->data_plane->status = 503;
  EXPECT_EQ(Codes(RunChecks(facts)),
            (std::vector<std::string>{"CONTROL_PLANE_UNREACHABLE", "PLANE_ERROR"}));
}

TEST(DoctorChecks, APlaneAnsweringAnythingButTheExpected200IsAnError) {
  // A redirect, a 404 from a proxy or another site, a 4xx: the daemon cannot use that plane.
  for (const int status : {301, 302, 400, 404, 405, 503}) {
    DeploymentFacts facts = HealthyFacts();
    facts.credential->data_plane->status = status;
    const std::vector<Finding> findings = RunChecks(facts);
    const Finding f = Only(findings, "PLANE_ERROR");
    EXPECT_THAT(f.seen, HasSubstr("answered HTTP " + std::to_string(status))) << status;
    EXPECT_EQ(ExitStatusFor(findings), 1) << status;
  }
}

// The credential's rate limit and a full listener queue are busy, not broken: the daemon
// retries them, so they are worth an info line, not an error.
TEST(DoctorChecks, ABusyPlaneIsNotAnError) {
  for (const auto& [status, code] :
       {std::pair{429, std::string("rate_limited")}, std::pair{503, std::string("overloaded")}}) {
    DeploymentFacts facts = HealthyFacts();
    facts.credential->control_plane->status = status;
    facts.credential->control_plane->code = code;
    const std::vector<Finding> findings = RunChecks(facts);
    const Finding f = Only(findings, "PLANE_BUSY");
    EXPECT_EQ(f.severity, Severity::kInfo);
    EXPECT_THAT(f.seen, HasSubstr("is busy: HTTP " + std::to_string(status))) << status;
    EXPECT_EQ(ExitStatusFor(findings), 0) << status;
  }
  // A 429 that is not expanse-server's (a proxy's, another site's) says nothing of the plane.
  DeploymentFacts facts = HealthyFacts();
  facts.credential->control_plane->status = 429;
  Only(RunChecks(facts), "PLANE_ERROR");
}

TEST(DoctorChecks, OutboxNearlyFull) {
  DeploymentFacts facts = HealthyFacts();
  facts.outbox->depth_bytes = 1900ull << 20;
  const Finding f = Only(RunChecks(facts), "OUTBOX_NEARLY_FULL");
  EXPECT_THAT(f.seen, HasSubstr("1900 MiB of its 2048 MiB"));
}

TEST(DoctorChecks, DiskLow) {
  DeploymentFacts facts = HealthyFacts();
  facts.disks[0].free_bytes = 100ull << 20;
  EXPECT_THAT(Only(RunChecks(facts), "DISK_LOW").seen, HasSubstr("/var/lib/expanse has 100 MiB"));
}

TEST(DoctorChecks, AttributionProcessOnAGpuItsJobWasNotGiven) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[0].gpu_use[1].jobs = {"43"};
  facts.nodes[0].gpu_use[1].processes = {{777, "42", false, false}};
  const Finding f = Only(RunChecks(facts), "ATTRIBUTION_DISAGREEMENT");
  EXPECT_EQ(f.host, "w1");
  EXPECT_THAT(f.seen, HasSubstr("pid 777 of job \"42\""));
  EXPECT_THAT(f.seen, HasSubstr("allocated to job \"43\""));
  EXPECT_THAT(f.fix, HasSubstr("ConstrainDevices=yes"));
}

TEST(DoctorChecks, AttributionProcessOutsideItsCgroup) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[0].gpu_use[0].processes[0].outside_cgroup = true;
  EXPECT_THAT(Only(RunChecks(facts), "ATTRIBUTION_DISAGREEMENT").seen,
              HasSubstr("left the job's cgroup"));
}

TEST(DoctorChecks, ProcessOfNoJobIsANote) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[0].gpu_use[1].processes = {{55, "", false, false}};
  const std::vector<Finding> findings = RunChecks(facts);
  EXPECT_EQ(Codes(findings), std::vector<std::string>{"ATTRIBUTION_UNATTRIBUTED_PROCESS"});
  EXPECT_EQ(ExitStatusFor(findings), 0);
}

TEST(DoctorChecks, CgroupDeviceListAgainstTheAllocation) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[0].job_devices = {{"42", "disagrees", {"GPU-a"}, {"GPU-a", "GPU-b"}, ""},
                                {"43", "disagrees", {"GPU-a", "GPU-b"}, {"GPU-b"}, ""}};
  const std::vector<Finding> findings = RunChecks(facts);
  EXPECT_EQ(ExitStatusFor(findings), 1);
  std::vector<Finding> named;
  for (const Finding& f : findings) {
    if (f.code == "ATTRIBUTION_CGROUP_DEVICES")
      named.push_back(f);
  }
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0].host, "w1");
  EXPECT_THAT(named[0].seen, HasSubstr("job \"42\"'s cgroup device list lets it open "
                                       "[\"GPU-a\", \"GPU-b\"] but SLURM allocated it [\"GPU-a\"] "
                                       "(not allocated: [\"GPU-b\"]"));
  EXPECT_THAT(named[0].fix, HasSubstr("gres.conf"));
  EXPECT_THAT(named[1].seen, HasSubstr("not allowed: [\"GPU-a\"]"));
  // The note says how many were checked and that none agreed.
  EXPECT_THAT(Named(findings, "ATTRIBUTION_SELF_CHECK").seen,
              HasSubstr("the GPUs of 2 running jobs checked against their cgroup device lists: "
                        "0 agree"));
}

TEST(DoctorChecks, CgroupThatConfinesNoGpuNeedsAction) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[0].job_devices = {{"42", "unconstrained", {"GPU-a"}, {}, "grants all"}};
  const std::vector<Finding> findings = RunChecks(facts);
  EXPECT_EQ(Codes(findings), (std::vector<std::string>{"ATTRIBUTION_DEVICES_UNCONSTRAINED",
                                                       "ATTRIBUTION_SELF_CHECK"}));
  const Finding f = Named(findings, "ATTRIBUTION_DEVICES_UNCONSTRAINED");
  EXPECT_THAT(f.seen, HasSubstr("lets it open every GPU of w1"));
  EXPECT_THAT(f.fix, HasSubstr("ConstrainDevices=yes"));
}

TEST(DoctorChecks, AgreeingAndUncheckedJobsAreOnlyANote) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[0].job_devices = {{"41", "agrees", {"GPU-a"}, {"GPU-a"}, ""},
                                {"42", "not_checked", {"GPU-b"}, {}, "cgroup v2"},
                                {"43", "not_checked", {"GPU-b"}, {}, "cgroup v2"},
                                {"44", "unreadable", {"GPU-b"}, {}, "permission denied"}};
  const std::vector<Finding> findings = RunChecks(facts);
  EXPECT_EQ(ExitStatusFor(findings), 0);
  EXPECT_EQ(Codes(findings),
            (std::vector<std::string>{"ATTRIBUTION_DEVICES_UNREADABLE", "ATTRIBUTION_SELF_CHECK"}));
  EXPECT_THAT(Named(findings, "ATTRIBUTION_SELF_CHECK").seen,
              HasSubstr("of 4 running jobs checked against their cgroup device lists: 1 agree; 2 "
                        "not checked (cgroup v2)"));
}

TEST(DoctorChecks, UnreadableReportIsOneFindingAndNoOtherNodeChecks) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[0] = NodeFacts{};
  facts.nodes[0].host = "w1";
  facts.nodes[0].error = "health.rec is damaged (bad_checksum)";
  const Finding f = Only(RunChecks(facts), "WORKER_REPORT_UNREADABLE");
  EXPECT_THAT(f.seen, HasSubstr("bad_checksum"));
}

TEST(DoctorChecks, HostileTextIsQuotedInFindings) {
  DeploymentFacts facts = HealthyFacts();
  facts.nodes[0].problem = "evil\x1b[2J\nline";
  const Finding f = Only(RunChecks(facts), "WORKER_PROBLEM");
  EXPECT_THAT(f.seen, ::testing::Not(HasSubstr("\x1b")));
  EXPECT_THAT(f.seen, ::testing::Not(HasSubstr("\n")));
}

TEST(DoctorChecks, OnlyWhatWasGatheredIsJudged) {
  DeploymentFacts facts;  // --host with nothing read: no slurm.conf, spool or credential facts
  facts.now_ms = kNowMs;
  facts.target = "w1";
  facts.nodes = {HealthyNode("w1", 0)};
  EXPECT_THAT(Codes(RunChecks(facts)), ::testing::IsEmpty());
}

TEST(DoctorFindings, TextAndJsonSayWhetherActionIsNeeded) {
  std::vector<Finding> findings = {
      {"HOOK_MISSING", Severity::kAction, "", "Prolog is not wired", "run this"},
      {"CAPABILITY_OFF", Severity::kInfo, "w1", "cupti is disabled", ""}};
  const std::string text = FindingsText(findings);
  EXPECT_THAT(text, HasSubstr("ACTION HOOK_MISSING: Prolog is not wired\n       fix: run this\n"));
  EXPECT_THAT(text, HasSubstr("info   CAPABILITY_OFF on w1: cupti is disabled\n"));
  EXPECT_THAT(text, HasSubstr("1 finding needs action"));
  const nlohmann::json doc = FindingsJson(findings, "", kNowMs);
  EXPECT_EQ(doc["version"], 1);
  EXPECT_EQ(doc["needs_action"], true);
  EXPECT_EQ(doc["findings"][0]["code"], "HOOK_MISSING");
  EXPECT_EQ(doc["findings"][1]["severity"], "info");
  EXPECT_EQ(doc["findings"][1]["host"], "w1");
  EXPECT_THAT(FindingsText({}), HasSubstr("nothing to do"));
  EXPECT_EQ(FindingsJson({}, "w1", kNowMs)["needs_action"], false);
}

}  // namespace
}  // namespace expanse::doctor
