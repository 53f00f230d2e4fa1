#include "spool/spool_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "core/quote.h"
#include "spool/fs_util.h"
#include "spool/hostile_read.h"
#include "spool/spool_format.h"
#include "spool/spool_names.h"
#include "spool/writer_state.h"

namespace expanse::spool {
namespace {

constexpr size_t kMaxWriterStateBytes = 4096;
// Room for the header, host, boot id and a zstd frame that did not shrink the body.
constexpr uint64_t kFileOverheadAllowance = 64u << 10;

Status InvalidOptions(const std::string& what) {
  return InvalidArgumentError("spool writer: " + what).WithReason("spool_bad_options");
}

}  // namespace

SpoolWriter::SpoolWriter(SpoolWriterOptions options, Clock& clock, std::string boot_id,
                         fs::UniqueFd host_dir, fs::UniqueFd state_dir)
    : options_(std::move(options)),
      clock_(clock),
      boot_id_(std::move(boot_id)),
      host_path_(fs::JoinPath(options_.spool_root, options_.hostname)),
      host_dir_(std::move(host_dir)),
      state_dir_(std::move(state_dir)) {}

Result<std::unique_ptr<SpoolWriter>> SpoolWriter::Open(SpoolWriterOptions options, Clock& clock) {
  if (!IsValidHostName(options.hostname)) {
    return InvalidOptions("host name " + QuoteForMessage(options.hostname) +
                          " is not [A-Za-z0-9._-]{1,64} starting with a letter or digit");
  }
  if (options.state_dir.empty())
    return InvalidOptions("state_dir is required (a local directory for the sequence state)");
  if (options.max_batch_bytes + kFileOverheadAllowance > kMaxFileBytes)
    return InvalidOptions("max_batch_bytes exceeds what one spool file can hold");
  std::string boot_id = options.boot_id;
  if (boot_id.empty()) {
    EXPANSE_ASSIGN_OR_RETURN(boot_id, ReadBootId(options.boot_id_path));
  } else if (!IsValidBootId(boot_id)) {
    return InvalidOptions("boot id " + QuoteForMessage(boot_id) + " is not [A-Za-z0-9-]{1,64}");
  }

  EXPANSE_ASSIGN_OR_RETURN(fs::UniqueFd root,
                           OpenConfiguredDirectory(options.spool_root, /*create=*/false, 0));
  if (::mkdirat(root.get(), options.hostname.c_str(), 0750) != 0 && errno != EEXIST)
    return IoError(errno, "create directory", fs::JoinPath(options.spool_root, options.hostname));
  // The controller refuses a host directory that is a symlink or someone else's; refuse it
  // here too, so the problem shows on the worker that can fix it.
  Result<fs::UniqueFd> host_dir =
      OpenHostileDirectory(root.get(), options.spool_root, options.hostname, ::geteuid());
  if (!host_dir.ok()) {
    return FailedPreconditionError("spool writer: " + host_dir.status().message())
        .WithReason("spool_host_dir_refused");
  }
  EXPANSE_ASSIGN_OR_RETURN(fs::UniqueFd state_dir,
                           OpenConfiguredDirectory(options.state_dir, /*create=*/true, 0700));
  std::unique_ptr<SpoolWriter> writer(new SpoolWriter(std::move(options), clock, std::move(boot_id),
                                                      std::move(host_dir).value(),
                                                      std::move(state_dir)));
  EXPANSE_RETURN_IF_ERROR(writer->RecoverSequence());
  return writer;
}

Status SpoolWriter::RecoverSequence() {
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> text,
                           ReadLocalFile(state_dir_.get(), options_.state_dir, kWriterStateFileName,
                                         kMaxWriterStateBytes));
  if (text.has_value()) {
    const std::optional<WriterState> state = ParseWriterState(*text);
    if (!state.has_value()) {
      Log("spool writer: ignoring unreadable " +
          fs::JoinPath(options_.state_dir, kWriterStateFileName) +
          "; continuing after the files still in " + host_path_);
    } else if (state->boot_id == boot_id_) {
      sequence_ = state->sequence;
    }
  }
  // Files of this boot not yet drained also bound the sequence: they cover a lost state file.
  EXPANSE_ASSIGN_OR_RETURN(std::vector<std::string> names,
                           ToSpoolError(fs::ListDirectoryAt(host_dir_.get(), host_path_)));
  for (const std::string& name : names) {
    const std::optional<SpoolFileNameParts> parts = ParseSpoolFileName(name);
    if (parts.has_value() && parts->boot_id == boot_id_)
      sequence_ = std::max(sequence_, parts->sequence);
  }
  return OkStatus();
}

Status SpoolWriter::Add(std::string_view kind, std::string_view payload) {
  if (!IsValidKind(kind)) {
    return InvalidArgumentError("spool writer: record kind " + QuoteForMessage(kind) +
                                " is not [a-z0-9_]{1,32}")
        .WithReason("spool_invalid_record");
  }
  if (payload.size() > kMaxRecordPayloadBytes) {
    return InvalidArgumentError("spool writer: " + std::to_string(payload.size()) +
                                "-byte record exceeds the " +
                                std::to_string(kMaxRecordPayloadBytes) + "-byte limit")
        .WithReason("spool_invalid_record");
  }
  std::lock_guard lock(mu_);
  const uint64_t size = kRecordOverhead + kind.size() + payload.size();
  if (batch_.size() >= options_.max_batch_records ||
      batch_bytes_ + size > options_.max_batch_bytes) {
    ++counters_.records_dropped_batch_full;
    return ResourceExhaustedError("spool writer: batch full (" + std::to_string(batch_.size()) +
                                  " records, " + std::to_string(batch_bytes_) +
                                  " bytes); record dropped")
        .WithReason("spool_batch_full");
  }
  batch_.push_back({std::string(kind), std::string(payload)});
  batch_bytes_ += size;
  ++counters_.records_accepted;
  return OkStatus();
}

namespace {

uint64_t GroupBytes(std::span<const std::pair<std::string, std::string>> records) {
  uint64_t bytes = 0;
  for (const auto& [kind, payload] : records)
    bytes += kRecordOverhead + kind.size() + payload.size();
  return bytes;
}

}  // namespace

bool SpoolWriter::Fits(std::span<const std::pair<std::string, std::string>> records) const {
  const uint64_t bytes = GroupBytes(records);
  std::lock_guard lock(mu_);
  return batch_.size() + records.size() <= options_.max_batch_records &&
         batch_bytes_ + bytes <= options_.max_batch_bytes;
}

Status SpoolWriter::AddAll(std::span<const std::pair<std::string, std::string>> records) {
  for (const auto& [kind, payload] : records) {
    if (!IsValidKind(kind) || payload.size() > kMaxRecordPayloadBytes)
      return Add(kind, payload);  // refused alone, with its own message; nothing queued
  }
  const uint64_t bytes = GroupBytes(records);
  std::lock_guard lock(mu_);
  if (records.size() > options_.max_batch_records || bytes > options_.max_batch_bytes) {
    return ResourceExhaustedError("spool writer: " + std::to_string(records.size()) +
                                  " records of " + std::to_string(bytes) +
                                  " bytes that travel together exceed a batch")
        .WithReason("spool_group_too_large");
  }
  if (batch_.size() + records.size() > options_.max_batch_records ||
      batch_bytes_ + bytes > options_.max_batch_bytes) {
    counters_.records_dropped_batch_full += records.size();
    return ResourceExhaustedError("spool writer: batch full (" + std::to_string(batch_.size()) +
                                  " records, " + std::to_string(batch_bytes_) + " bytes); " +
                                  std::to_string(records.size()) + " records dropped")
        .WithReason("spool_batch_full");
  }
  for (const auto& [kind, payload] : records)
    batch_.push_back({kind, payload});
  batch_bytes_ += bytes;
  counters_.records_accepted += records.size();
  return OkStatus();
}

Status SpoolWriter::CheckBudget(uint64_t file_bytes) {
  EXPANSE_ASSIGN_OR_RETURN(std::vector<std::string> names,
                           ToSpoolError(fs::ListDirectoryAt(host_dir_.get(), host_path_)));
  uint64_t used = 0;
  for (const std::string& name : names) {
    struct stat st {};
    if (::fstatat(host_dir_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
      used += static_cast<uint64_t>(std::max<off_t>(st.st_size, 0));
  }
  if (names.size() + 1 <= options_.max_dir_files && used + file_bytes <= options_.max_dir_bytes)
    return OkStatus();
  return ResourceExhaustedError(
             "spool writer: " + host_path_ + " holds " + std::to_string(names.size()) + " files, " +
             std::to_string(used) + " bytes; a " + std::to_string(file_bytes) +
             "-byte file would exceed the budget (" + std::to_string(options_.max_dir_files) +
             " files, " + std::to_string(options_.max_dir_bytes) +
             " bytes); is the controller draining the spool?")
      .WithReason("spool_full");
}

Status SpoolWriter::Flush(bool force) {
  std::lock_guard lock(mu_);
  if (batch_.empty())
    return OkStatus();
  const int64_t now = clock_.NowMs();
  if (have_written_ && now >= last_file_ms_ && !force &&
      now - last_file_ms_ < options_.min_flush_interval_ms) {
    ++counters_.flushes_deferred;
    return OkStatus();
  }
  SpoolFile file{options_.hostname, boot_id_, sequence_ + 1, now, std::move(batch_)};
  batch_.clear();
  const auto keep_batch = [&](Status status) {
    batch_ = std::move(file.records);
    ++counters_.write_errors;
    return status;
  };
  Result<std::string> bytes = EncodeSpoolFile(file, {.zstd_level = options_.zstd_level});
  if (!bytes.ok())
    return keep_batch(bytes.status());
  if (Status status = CheckBudget(bytes->size()); !status.ok()) {
    if (status.code() != StatusCode::kResourceExhausted)
      return keep_batch(std::move(status));
    counters_.records_dropped_spool_full += file.records.size();
    batch_bytes_ = 0;
    if (!spool_full_logged_)
      Log(status.message() + " (logged once until a file is written again)");
    spool_full_logged_ = true;
    return status;
  }
  // The sequence is reserved durably before the file appears: after a crash between the two
  // the restarted writer skips a number, which the aggregator tolerates, rather than reuse
  // one, which it would take for a duplicate.
  if (Status status = ReplaceFile(state_dir_.get(), options_.state_dir, kWriterStateFileName,
                                  FormatWriterState({boot_id_, file.sequence}), 0600);
      !status.ok()) {
    return keep_batch(std::move(status));
  }
  sequence_ = file.sequence;
  if (Status status = ReplaceFile(host_dir_.get(), host_path_,
                                  SpoolFileName(file.sequence, boot_id_), *bytes, 0640);
      !status.ok()) {
    return keep_batch(std::move(status));
  }
  ++counters_.files_written;
  counters_.records_written += file.records.size();
  counters_.bytes_written += bytes->size();
  batch_bytes_ = 0;
  last_file_ms_ = now;
  have_written_ = true;
  spool_full_logged_ = false;
  return OkStatus();
}

Status SpoolWriter::WriteHealth(std::string_view payload) {
  std::lock_guard lock(mu_);
  if (payload.size() > options_.max_health_bytes) {
    return InvalidArgumentError("spool writer: " + std::to_string(payload.size()) +
                                "-byte health report exceeds the " +
                                std::to_string(options_.max_health_bytes) + "-byte limit")
        .WithReason("spool_invalid_record");
  }
  SpoolFile file{options_.hostname,
                 boot_id_,
                 sequence_,
                 clock_.NowMs(),
                 {{kHealthRecordKind, std::string(payload)}}};
  EXPANSE_ASSIGN_OR_RETURN(std::string bytes, EncodeSpoolFile(file, {.zstd_level = 0}));
  EXPANSE_RETURN_IF_ERROR(ReplaceFile(host_dir_.get(), host_path_, kHealthFileName, bytes, 0640));
  ++counters_.health_writes;
  return OkStatus();
}

SpoolWriterCounters SpoolWriter::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

uint64_t SpoolWriter::last_sequence() const {
  std::lock_guard lock(mu_);
  return sequence_;
}

void SpoolWriter::Log(const std::string& line) {
  if (options_.log)
    options_.log(line);
}

}  // namespace expanse::spool
