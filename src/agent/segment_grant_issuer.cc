#include "agent/segment_grant_issuer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/segment_grant_files.h"
#include "agent/segment_upload.h"
#include "core/file_util.h"
#include "spool/hostile_read.h"
#include "wire/error_answer.h"

namespace expanse::agent {

SegmentGrantIssuer::SegmentGrantIssuer(SegmentGrantIssuerOptions options, net::HttpClient& client,
                                       std::function<std::string()> credential, Clock& clock)
    : options_(std::move(options)),
      client_(client),
      credential_(std::move(credential)),
      clock_(clock),
      backoff_(options_.backoff_base_ms, options_.backoff_cap_ms, outbox::DefaultRandomSource()) {}

Status SegmentGrantIssuer::RunOnce() {
  const int64_t now = clock_.NowMs();
  if (options_.grant_root.empty() || now < stats_.next_attempt_ms ||
      (last_pass_ms_ != 0 && now - last_pass_ms_ < options_.min_pass_interval_ms))
    return OkStatus();
  last_pass_ms_ = now;
  Result<std::vector<std::string>> hosts = fs::ListDirectory(options_.grant_root);
  if (!hosts.ok())
    return OkStatus();  // no worker has asked yet
  size_t answered = 0;
  for (const std::string& host : *hosts) {
    if (!IsSpoolHostName(host))
      continue;
    const std::string dir = options_.grant_root + "/" + host;
    const fs::UniqueFd dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dir_fd.valid())
      continue;
    Result<std::vector<std::string>> names = fs::ListDirectoryAt(dir_fd.get(), dir);
    if (!names.ok())
      continue;
    std::sort(names->begin(), names->end());
    std::string buffer;
    for (const std::string& name : *names) {
      if (IsSegmentGrantFileName(name)) {
        // A grant nobody took: its segment went another way, or its sampler is gone.
        struct stat st {};
        if (fstatat(dir_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            clock_.NowMs() - int64_t{st.st_mtim.tv_sec} * 1000 > options_.stale_grant_ms &&
            unlinkat(dir_fd.get(), name.c_str(), 0) == 0) {
          ++stats_.stale_removed;
        }
        continue;
      }
      if (name.rfind("request-", 0) != 0)
        continue;  // temporaries (dot files), and nothing of ours
      const std::optional<SegmentGrantRequest> request = ParseSegmentGrantRequestName(name);
      if (!request) {
        Refuse(dir, name, "bad_name", "not request-<sha256>-<bytes>");
        continue;
      }
      Result<std::string_view> bytes = spool::ReadHostileFile(
          dir_fd.get(), dir, name,
          spool::HostileReadLimits{.expected_uid = options_.expected_uid, .max_bytes = 64}, buffer);
      if (!bytes.ok()) {
        if (bytes.status().code() == StatusCode::kDataLoss)
          Refuse(dir, name, bytes.status().reason(), bytes.status().message());
        continue;  // vanished, or unreadable for now
      }
      if (answered++ >= options_.max_requests_per_pass)
        return OkStatus();  // the rest at the next pass
      Result<bool> done = Issue(dir, host, name, request->sha256, request->bytes);
      if (!done.ok())
        return done.status();
      if (!*done)
        return OkStatus();  // the server is away or busy: the rest waits for the backoff
    }
  }
  return OkStatus();
}

Result<bool> SegmentGrantIssuer::Issue(const std::string& dir, const std::string& host,
                                       const std::string& name, const std::string& sha256,
                                       uint64_t bytes) {
  const std::string credential = credential_();
  if (credential.empty())
    return UnauthenticatedError("no compute credential to ask for segment grants with")
        .WithReason("credential_missing");
  net::HttpRequest request;
  request.method = "POST";
  request.url = options_.data_plane_url + kSegmentGrantsPath;
  request.headers = {{"Authorization", "Bearer " + credential},
                     {"Content-Type", "application/json"}};
  request.body = nlohmann::json{{"host", host}, {"sha256", sha256}, {"bytes", bytes}}.dump();
  Result<net::HttpResponse> response = client_.Send(request);
  if (!response.ok())
    return Retry(response.status().message());
  if (response->status == 401)
    return UnauthenticatedError("the server refused the credential for segment grants")
        .WithReason("credential_refused");
  if (response->status == 400 || response->status == 403 || response->status == 404) {
    const wire::ErrorAnswer answer = wire::DecodeErrorAnswer(response->body);
    Refuse(dir, name, "refused_" + std::to_string(response->status),
           answer.code + (answer.message.empty() ? "" : ": " + answer.message));
    return true;
  }
  if (response->status != 201)
    return Retry("HTTP " + std::to_string(response->status) + " asking for a segment grant");

  // The server's answer is outside input too: it must make a grant file the worker accepts.
  Result<SegmentGrantFile> file =
      GrantFileFromAnswer(response->body, options_.data_plane_url + kSegmentIngestPath);
  if (!file.ok())
    return Retry(file.status().message());
  const std::string contents = EncodeSegmentGrantFile(*file);
  if (Status written = fs::WriteFileAtomically(dir, SegmentGrantFileName(sha256), contents, 0600);
      !written.ok()) {
    return Retry(written.message());
  }
  unlink((dir + "/" + name).c_str());
  backoff_.Reset();
  stats_.next_attempt_ms = 0;
  stats_.last_error.clear();
  ++stats_.issued;
  return true;
}

void SegmentGrantIssuer::Refuse(const std::string& dir, const std::string& name,
                                const std::string& reason, const std::string& detail) {
  ++stats_.refused[reason];
  if (options_.log)
    options_.log("segment grant request " + dir + "/" + name + " refused (" + reason +
                 "): " + detail);
  // A request holds nothing worth keeping: it goes, rather than being refused every pass.
  unlink((dir + "/" + name).c_str());
}

bool SegmentGrantIssuer::Retry(std::string error) {
  ++stats_.retries;
  if (stats_.last_error != error && options_.log)
    options_.log("segment grant request failed, will retry: " + error);
  stats_.last_error = std::move(error);
  stats_.next_attempt_ms = clock_.NowMs() + backoff_.NextDelayMs();
  return false;
}

}  // namespace expanse::agent
