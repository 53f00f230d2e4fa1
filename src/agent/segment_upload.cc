#include "agent/segment_upload.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/file_util.h"
#include "outbox/payload.h"
#include "spool/hostile_read.h"
#include "wire/trace_segment_header.h"

namespace expanse::agent {
namespace {

bool IsSegmentName(const std::string& name) {
  return name.size() > 9 && name.rfind("seg-", 0) == 0 &&
         name.compare(name.size() - 5, 5, ".json") == 0 && name.find('/') == std::string::npos;
}

struct Candidate {
  std::string dir;
  std::string host;
  std::string name;
  int64_t mtime_ns = 0;
};

void AddSegments(const std::string& dir, const std::string& host, std::vector<Candidate>& out) {
  Result<std::vector<std::string>> names = fs::ListDirectory(dir);
  if (!names.ok())
    return;
  for (const std::string& name : *names) {
    if (!IsSegmentName(name))
      continue;  // temporaries (dot files) and anything else are not segments
    struct stat st {};
    const int64_t mtime = lstat((dir + "/" + name).c_str(), &st) == 0
                              ? int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec
                              : 0;
    out.push_back({dir, host, name, mtime});
  }
}

}  // namespace

bool IsSpoolHostName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name[0] == '.' || name[0] == '-')
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

SegmentUploader::SegmentUploader(SegmentUploadOptions options, net::HttpClient& client,
                                 std::function<std::string()> credential, Clock& clock)
    : options_(std::move(options)),
      client_(client),
      credential_(std::move(credential)),
      clock_(clock),
      backoff_(options_.backoff_base_ms, options_.backoff_cap_ms, outbox::DefaultRandomSource()) {}

Status SegmentUploader::RunOnce() {
  const int64_t now = clock_.NowMs();
  if (now < stats_.next_attempt_ms)
    return OkStatus();
  std::vector<Candidate> candidates;
  if (!options_.relay_root.empty()) {
    Result<std::vector<std::string>> hosts = fs::ListDirectory(options_.relay_root);
    for (const std::string& host : hosts.ok() ? *hosts : std::vector<std::string>{}) {
      if (IsSpoolHostName(host))
        AddSegments(options_.relay_root + "/" + host, host, candidates);
    }
  }
  if (!options_.own_ready_dir.empty())
    AddSegments(options_.own_ready_dir, options_.own_host, candidates);
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.name < b.name;
  });

  uint64_t sent_bytes = 0;
  std::string buffer;
  for (const Candidate& c : candidates) {
    if (sent_bytes >= options_.max_bytes_per_pass)
      break;
    const fs::UniqueFd dir_fd(open(c.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir_fd.valid())
      continue;
    const spool::HostileReadLimits limits{.expected_uid = options_.expected_uid,
                                          .max_bytes = wire::kMaxTraceSegmentBytes};
    Result<std::string_view> bytes =
        spool::ReadHostileFile(dir_fd.get(), c.dir, c.name, limits, buffer);
    if (!bytes.ok()) {
      if (bytes.status().code() == StatusCode::kDataLoss)
        Quarantine(c.dir, c.host, c.name, bytes.status().reason(), bytes.status().message());
      continue;  // vanished, or unreadable for now
    }
    Result<wire::TraceSegmentHeader> header =
        wire::ParseTraceSegmentHeader(*bytes, c.dir + "/" + c.name, "bad_segment");
    if (!header.ok()) {
      Quarantine(c.dir, c.host, c.name, "bad_segment", header.status().message());
      continue;
    }
    if (header->host != c.host) {
      Quarantine(c.dir, c.host, c.name, "wrong_host", "names host " + header->host);
      continue;
    }
    Result<bool> done = Upload(c.dir, c.name, c.host, *bytes);
    if (!done.ok())
      return done.status();
    if (!*done)
      return OkStatus();  // the server is away or busy: the rest waits for the backoff
    unlink((c.dir + "/" + c.name).c_str());
    sent_bytes += bytes->size();
  }
  return OkStatus();
}

Result<bool> SegmentUploader::Upload(const std::string& dir, const std::string& name,
                                     const std::string& host, std::string_view bytes) {
  Result<outbox::Payload> payload = outbox::ZstdJsonPayload(bytes);
  if (!payload.ok())
    return false;
  const std::string credential = credential_();
  if (credential.empty())
    return UnauthenticatedError("no compute credential to send trace segments with")
        .WithReason("credential_missing");
  net::HttpRequest request;
  request.method = "POST";
  request.url = options_.data_plane_url + kSegmentIngestPath;
  request.headers = {{"Authorization", "Bearer " + credential},
                     {"Content-Type", payload->content_type}};
  request.body = std::move(payload->bytes);
  Result<net::HttpResponse> response = client_.Send(request);
  const auto retry = [&](std::string error) {
    ++stats_.retries;
    if (stats_.last_error != error && options_.log)
      options_.log("trace segment upload failed, will retry: " + error);
    stats_.last_error = std::move(error);
    stats_.next_attempt_ms = clock_.NowMs() + backoff_.NextDelayMs();
    return false;
  };
  if (!response.ok())
    return retry(response.status().message());
  if (response->status == 200) {
    backoff_.Reset();
    stats_.next_attempt_ms = 0;
    stats_.last_error.clear();
    ++stats_.uploaded;
    stats_.bytes += bytes.size();
    if (response->body.find("\"duplicate\":true") != std::string::npos)
      ++stats_.duplicates;
    return true;
  }
  if (response->status == 401)
    return UnauthenticatedError("the server refused the credential for trace segments")
        .WithReason("credential_refused");
  // The server refuses this segment for good: it goes to quarantine, not again and again.
  if (response->status == 400 || response->status == 413 || response->status == 415) {
    Quarantine(dir, host, name, "refused_" + std::to_string(response->status),
               response->body.substr(0, 300));
    return false;
  }
  return retry("HTTP " + std::to_string(response->status));
}

void SegmentUploader::Quarantine(const std::string& dir, const std::string& host,
                                 const std::string& name, const std::string& reason,
                                 const std::string& detail) {
  ++stats_.refused[reason];
  if (options_.log)
    options_.log("trace segment " + dir + "/" + name + " refused (" + reason + "): " + detail);
  // Beside the spool it came from (a rename within its file system), or the daemon's own.
  const std::string quarantine =
      !options_.relay_root.empty() && dir.rfind(options_.relay_root + "/", 0) == 0
          ? options_.relay_root + "/.quarantine"
          : options_.quarantine_dir;
  const std::string target = std::to_string(clock_.NowMs()) + "-" +
                             std::to_string(quarantine_sequence_++) + "-" + host + "-" + name +
                             "-" + reason;
  if (fs::MakeDirectories(quarantine, 0700).ok() &&
      rename((dir + "/" + name).c_str(), (quarantine + "/" + target).c_str()) == 0) {
    // Bounded: the oldest quarantined files go (names start with the time).
    Result<std::vector<std::string>> kept = fs::ListDirectory(quarantine);
    if (kept.ok() && kept->size() > options_.max_quarantined) {
      std::sort(kept->begin(), kept->end());
      for (size_t i = 0; i + options_.max_quarantined < kept->size(); ++i)
        unlink((quarantine + "/" + (*kept)[i]).c_str());
    }
    return;
  }
  // It could not be moved: it goes, rather than being refused again every pass.
  unlink((dir + "/" + name).c_str());
}

}  // namespace expanse::agent
