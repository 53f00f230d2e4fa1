#include "promstore/remote_telemetry_store.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>

#include "net/url_policy.h"
#include "promstore/promql.h"
#include "promstore/remote_write.h"
#include "tsdb/downsample.h"

namespace expanse::promstore {

std::string FormEncode(const std::vector<std::pair<std::string, std::string>>& fields) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const auto& [name, value] : fields) {
    if (!out.empty())
      out.push_back('&');
    for (const std::string* part : {&name, &value}) {
      for (const char c : *part) {
        const auto u = static_cast<unsigned char>(c);
        if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
          out.push_back(c);
        } else {
          out.push_back('%');
          out.push_back(kHex[u >> 4]);
          out.push_back(kHex[u & 15]);
        }
      }
      if (part == &name)
        out.push_back('=');
    }
  }
  return out;
}

class RemoteTelemetryStore::Lease {
 public:
  Lease(RemoteTelemetryStore& owner, std::unique_ptr<net::HttpClient> client)
      : owner_(&owner), client_(std::move(client)) {}
  Lease(Lease&& other) noexcept = default;
  Lease& operator=(Lease&&) = delete;
  ~Lease() {
    if (client_ == nullptr)
      return;
    {
      std::lock_guard lock(owner_->pool_mu_);
      owner_->idle_.push_back(std::move(client_));
    }
    owner_->pool_cv_.notify_one();
  }
  net::HttpClient& client() { return *client_; }

 private:
  RemoteTelemetryStore* owner_;
  std::unique_ptr<net::HttpClient> client_;
};

Result<std::unique_ptr<RemoteTelemetryStore>> RemoteTelemetryStore::Open(
    RemoteTelemetryOptions options, store::JobStore& batches, Clock& clock) {
  if (options.write_url.empty() || options.query_url.empty()) {
    return InvalidArgumentError(
        "the remote telemetry store needs a write URL and a query URL (--telemetry-url)");
  }
  while (!options.query_url.empty() && options.query_url.back() == '/')
    options.query_url.pop_back();
  for (const std::string* url : {&options.write_url, &options.query_url}) {
    if (Status allowed = net::CheckUrlAllowed(*url + (url == &options.query_url ? "/" : ""));
        !allowed.ok()) {
      return InvalidArgumentError("remote telemetry store URL " + *url + ": " + allowed.message());
    }
  }
  if (options.connections < 1 || options.connections > 64)
    return InvalidArgumentError("remote telemetry store connections must be 1 to 64");
  if (options.write_groups < 1 || options.write_groups > options.connections)
    return InvalidArgumentError("remote telemetry store write groups must be 1 to its connections");
  if (options.claim_lease_ms <= 0 || options.max_points_per_request < 1 ||
      options.max_waiting_samples < 1)
    return InvalidArgumentError("remote telemetry store limits must be positive");
  std::unique_ptr<RemoteTelemetryStore> store(
      new RemoteTelemetryStore(std::move(options), batches, clock));
  net::HttpClientOptions client_options;
  client_options.ca_file = store->options_.ca_file;
  client_options.total_timeout = store->options_.timeout;
  client_options.connect_timeout =
      std::min(store->options_.timeout, client_options.connect_timeout);
  // A query's answer holds every bucket of every series asked for.
  client_options.max_response_bytes = 256u << 20;
  client_options.user_agent = "expanse-server";
  for (int i = 0; i < store->options_.connections; ++i) {
    EXPANSE_ASSIGN_OR_RETURN(std::unique_ptr<net::HttpClient> client,
                             net::HttpClient::Create(client_options));
    store->idle_.push_back(std::move(client));
  }
  try {
    for (int i = 1; i < store->options_.write_groups; ++i)
      store->helpers_.emplace_back([s = store.get()] { s->HelperLoop(); });
  } catch (const std::system_error& e) {
    return InternalError(std::string("cannot start the remote store's writer threads: ") +
                         e.what());
  }
  return store;
}

RemoteTelemetryStore::Lease RemoteTelemetryStore::Borrow() {
  std::unique_lock lock(pool_mu_);
  pool_cv_.wait(lock, [&] { return !idle_.empty(); });
  std::unique_ptr<net::HttpClient> client = std::move(idle_.back());
  idle_.pop_back();
  return Lease(*this, std::move(client));
}

Result<net::HttpResponse> RemoteTelemetryStore::Send(net::HttpRequest request) {
  if (!options_.bearer_token.empty())
    request.headers.emplace_back("Authorization", "Bearer " + options_.bearer_token);
  Lease lease = Borrow();
  Result<net::HttpResponse> response = lease.client().Send(request);
  if (!response.ok()) {
    // The client's message names the method and URL, never a header.
    return Status(response.status().code(),
                  "the telemetry store cannot be reached: " + response.status().message());
  }
  return response;
}

namespace {

// What an answer's status means for the caller: the store's 5xx and 429 pass (the sender
// retries); any other refusal is this server's problem (a wrong URL, a store that does not
// speak the protocol), said with the start of the store's message.
Status AnswerStatus(const net::HttpResponse& response, std::string_view what) {
  if (response.status >= 200 && response.status < 300)
    return OkStatus();
  std::string message = "the telemetry store answered " + std::to_string(response.status) + " to " +
                        std::string(what);
  if (!response.body.empty())
    message += ": " + response.body.substr(0, 300);
  if (response.status == 429 || response.status >= 500)
    return UnavailableError(message);
  return InternalError(message);
}

}  // namespace

struct RemoteTelemetryStore::Writer {
  std::string_view batch_id;
  std::string_view compute_id;
  std::string_view credential_hash;  // "" when the caller authenticated the sender
  const tsdb::Batch* batch = nullptr;
  size_t samples = 0;
  Result<AppendResult> result = AppendResult{};
  AppendDone done;
};

namespace {

// A group holds at most this many batches or samples (one batch over it goes alone), so a
// remote write stays far below receivers' request limits (VictoriaMetrics: 32 MiB). 16, about
// one envelope of a controller's backlog: VictoriaMetrics spent less CPU per sample on remote
// writes of 16 batches (~25,000 samples) than of 64 (~100,000), and at 16 requests in flight
// the tier's rate rose with it (docs/performance.md, "groups of 16 batches").
constexpr size_t kMaxGroupBatches = 16;
constexpr size_t kMaxGroupSamples = 200'000;
// Marks waiting for a next group, at most (with a group's own claims, far below a statement's
// limit of 1,000 batches).
constexpr size_t kMaxUnmarked = 256;
// Marks one claim statement carries at most: with a group's own batches (kMaxGroupBatches) far
// below the 1,000 batches a statement may name.
constexpr size_t kMaxMarksPerClaim = 256;

Status InFlightError(std::string_view batch_id) {
  return UnavailableError("batch " + std::string(batch_id) +
                          " is being stored by another replica; send it again shortly")
      .WithReason("batch_in_flight");
}

}  // namespace

Result<tsdb::TelemetryStore::AppendResult> RemoteTelemetryStore::Append(std::string_view batch_id,
                                                                        const tsdb::Batch& batch,
                                                                        Ack /*ack*/) {
  return AppendAndWait(batch_id, batch, "");
}

Result<tsdb::TelemetryStore::AppendResult> RemoteTelemetryStore::AppendForCredential(
    std::string_view batch_id, const tsdb::Batch& batch, std::string_view credential_hash) {
  if (credential_hash.empty())
    return InvalidArgumentError("a credential check needs the credential's hash");
  return AppendAndWait(batch_id, batch, credential_hash);
}

Result<tsdb::TelemetryStore::AppendResult> RemoteTelemetryStore::AppendAndWait(
    std::string_view batch_id, const tsdb::Batch& batch, std::string_view credential_hash) {
  // Answered on this thread when it leads the batch's group, else by the thread that does.
  std::promise<Result<AppendResult>> answer;
  std::future<Result<AppendResult>> answered = answer.get_future();
  AppendLater(batch_id, batch, Ack::kDurable, credential_hash,
              [&answer](Result<AppendResult> result) { answer.set_value(std::move(result)); });
  return answered.get();
}

void RemoteTelemetryStore::AppendLater(std::string_view batch_id, const tsdb::Batch& batch, Ack ack,
                                       std::string_view credential_hash, AppendDone done) {
  std::vector<PendingAppend> one;
  one.push_back({.batch_id = batch_id,
                 .batch = &batch,
                 .credential_hash = credential_hash,
                 .done = std::move(done)});
  AppendAllLater(std::move(one), ack);
}

std::unique_ptr<RemoteTelemetryStore::Writer> RemoteTelemetryStore::NewWriter(
    PendingAppend& append) {
  // Answers are always durable: the store's acceptance is the only mark there is.
  const tsdb::Batch& batch = *append.batch;
  const size_t samples = batch.sample_count();
  if (samples == 0) {
    // Nothing to claim, so nothing would check the credential.
    if (!append.credential_hash.empty()) {
      append.done(
          FailedPreconditionError("a batch without samples is not checked for its credential"));
      return nullptr;
    }
    append.done(AppendResult{.durable = true});
    return nullptr;
  }
  // Checked before the batch joins a group, whose claim statement it would otherwise fail.
  if (append.batch_id.empty() || append.batch_id.size() > store::JobStore::kMaxBatchIdBytes) {
    append.done(InvalidArgumentError("batch id must be 1 to " +
                                     std::to_string(store::JobStore::kMaxBatchIdBytes) + " bytes"));
    return nullptr;
  }
  const std::string_view compute_id = batch.front().key.compute_id;
  if (compute_id.empty()) {
    append.done(InvalidArgumentError("a batch's series must name their compute"));
    return nullptr;
  }
  auto writer = std::make_unique<Writer>();
  writer->batch_id = append.batch_id;
  writer->compute_id = compute_id;
  writer->credential_hash = append.credential_hash;
  writer->batch = &batch;
  writer->samples = samples;
  writer->done = std::move(append.done);
  return writer;
}

void RemoteTelemetryStore::AppendAllLater(std::vector<PendingAppend> appends, Ack /*ack*/) {
  std::vector<std::unique_ptr<Writer>> writers;
  writers.reserve(appends.size());
  for (PendingAppend& append : appends) {
    if (std::unique_ptr<Writer> writer = NewWriter(append))
      writers.push_back(std::move(writer));
  }
  std::vector<std::unique_ptr<Writer>> refused;  // answered once the lock is let go
  size_t waiting_when_refused = 0;
  const Writer* own_last = nullptr;  // the last of this request's batches to wait
  std::unique_lock lock(write_mu_);
  // Waiting batches are parsed batches in memory whose requests hold no worker: bounded (see
  // max_waiting_samples). Over it the sender is told to come back, as when the remote store
  // is slow to answer. One request's batches join together, so a group takes them all.
  for (std::unique_ptr<Writer>& writer : writers) {
    if (!waiting_.empty() && waiting_samples_ + writer->samples > options_.max_waiting_samples) {
      waiting_when_refused = waiting_samples_;
      refused.push_back(std::move(writer));
      continue;
    }
    waiting_samples_ += writer->samples;
    own_last = writer.get();
    waiting_.push_back(std::move(writer));
  }
  if (!refused.empty()) {
    lock.unlock();
    for (std::unique_ptr<Writer>& writer : refused) {
      writer->result = UnavailableError("the telemetry store is behind: " +
                                        std::to_string(waiting_when_refused) +
                                        " samples wait for it already; send the batch again "
                                        "shortly")
                           .WithReason("store_busy");
      Answer(*writer);
    }
    lock.lock();
  }
  LeadGroups(lock, own_last);
}

void RemoteTelemetryStore::LeadGroups(std::unique_lock<std::mutex>& lock, const Writer* own_last) {
  // Lead groups while batches wait and a slot is free: the batches from the front, these
  // among them unless a bound cut them off (then a helper, this thread, or another leader
  // that finished first, takes them next). A leader that finished its group takes the next
  // itself, so a busy replica wakes no thread to write it; with every slot taken, the
  // batches wait for a leader.
  while (!waiting_.empty() && groups_in_flight_ < options_.write_groups) {
    std::vector<std::unique_ptr<Writer>> group;
    std::vector<std::string> marks;
    bool marked = false;
    ++groups_in_flight_;
    try {
      size_t group_samples = 0;
      while (!waiting_.empty() && group.size() < kMaxGroupBatches) {
        if (!group.empty() && group_samples + waiting_.front()->samples > kMaxGroupSamples)
          break;
        group_samples += waiting_.front()->samples;
        group.push_back(std::move(waiting_.front()));
        waiting_samples_ -= group.back()->samples;
        waiting_.pop_front();
      }
      while (!unmarked_.empty() && marks.size() < kMaxMarksPerClaim)
        marks.push_back(std::move(unmarked_.extract(unmarked_.begin()).value()));
      // This request's own batches left behind, more than one group holds, with a slot free:
      // a helper writes the next group beside this one instead of after it. Batches of other
      // requests are left to their leaders as before (a wake-up each would cost more than
      // it saved when many requests arrive together).
      if (own_last != nullptr && !waiting_.empty() && waiting_.back().get() == own_last &&
          groups_in_flight_ < options_.write_groups && idle_helpers_ > 0) {
        helper_cv_.notify_one();
      }
      own_last = nullptr;  // since the lock is let go, later batches may be anyone's
      lock.unlock();
      std::vector<Writer*> members;
      for (const std::unique_ptr<Writer>& member : group)
        members.push_back(member.get());
      marked = WriteGroup(members, marks);
    } catch (const std::exception& e) {
      // Out of memory, most likely: every batch of the group is answered (its sender sends
      // it again), the slot is freed and the marks are kept.
      for (const std::unique_ptr<Writer>& member : group)
        member->result = InternalError(std::string("writing a group of batches: ") + e.what());
    } catch (...) {
      for (const std::unique_ptr<Writer>& member : group)
        member->result = InternalError("writing a group of batches failed");
    }
    if (!lock.owns_lock())
      lock.lock();
    --groups_in_flight_;
    if (!marked)
      unmarked_.insert(std::make_move_iterator(marks.begin()),
                       std::make_move_iterator(marks.end()));
    lock.unlock();
    // Answered with the slot free (another thread may lead the next group meanwhile), each
    // batch's memory let go as soon as it is answered.
    for (std::unique_ptr<Writer>& member : group) {
      Answer(*member);
      member.reset();
    }
    lock.lock();
  }
}

void RemoteTelemetryStore::HelperLoop() {
  std::unique_lock lock(write_mu_);
  while (!closing_) {
    ++idle_helpers_;
    helper_cv_.wait(lock, [this] {
      return closing_ || (!waiting_.empty() && groups_in_flight_ < options_.write_groups);
    });
    --idle_helpers_;
    if (!closing_)
      LeadGroups(lock, nullptr);
  }
}

void RemoteTelemetryStore::Answer(Writer& writer) {
  // A caller's `done` that throws must not stop its leader answering the rest. The id is the
  // caller's, gone once `done` ran: copied first.
  const std::string batch_id(writer.batch_id);
  try {
    writer.done(std::move(writer.result));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "expanse-server: answering batch %s: %s\n", batch_id.c_str(), e.what());
  } catch (...) {
    std::fprintf(stderr, "expanse-server: answering batch %s failed\n", batch_id.c_str());
  }
}

bool RemoteTelemetryStore::WriteGroup(const std::vector<Writer*>& group,
                                      const std::vector<std::string>& marks) {
  // A statement names each batch once: the same batch twice in a group (a sender's retry
  // racing its first attempt) is in flight for the second; a retry of a batch answered but
  // not yet marked is the repeat it is.
  std::vector<Writer*> unique;
  std::vector<store::JobStore::BatchToClaim> to_claim;
  std::set<std::string_view> seen(marks.begin(), marks.end());
  for (Writer* w : group) {
    if (!seen.insert(w->batch_id).second) {
      const bool answered = std::find(marks.begin(), marks.end(), w->batch_id) != marks.end();
      w->result = answered ? Result<AppendResult>(AppendResult{.duplicate = true, .durable = true})
                           : Result<AppendResult>(InFlightError(w->batch_id));
      continue;
    }
    unique.push_back(w);
    to_claim.push_back({.compute_id = w->compute_id,
                        .batch_id = w->batch_id,
                        .credential_hash = w->credential_hash});
  }
  const std::vector<std::string_view> mark_ids(marks.begin(), marks.end());
  if (to_claim.empty()) {
    // Every batch of the group was a repeat: the marks go alone.
    const Status marked =
        mark_ids.empty() ? OkStatus() : batches_.MarkIngestBatchesStored(mark_ids, clock_.NowMs());
    return marked.ok() || marked.code() == StatusCode::kNotFound;
  }
  int64_t claimed_at_ms = clock_.NowMs();  // what a release names (ReleaseIngestBatches)
  Result<std::vector<store::JobStore::BatchClaim>> claims = batches_.MarkAndClaimIngestBatches(
      mark_ids, to_claim, claimed_at_ms, options_.claim_lease_ms);
  bool marked = true;
  if (!claims.ok() && !mark_ids.empty()) {
    // The marks are not this group's to fail (a deadlock with another replica's claim, one
    // PostgreSQL breaks by aborting a statement, say): the claim alone, the marks kept.
    marked = false;
    claimed_at_ms = clock_.NowMs();
    claims = batches_.ClaimIngestBatches(to_claim, claimed_at_ms, options_.claim_lease_ms);
  }
  if (!claims.ok()) {
    for (Writer* w : unique)
      w->result = claims.status();
    return false;
  }
  std::vector<Writer*> claimed;
  std::vector<const tsdb::Batch*> to_send;
  std::vector<std::string_view> claimed_ids;
  for (size_t i = 0; i < unique.size(); ++i) {
    Writer* w = unique[i];
    switch ((*claims)[i]) {
      case store::JobStore::BatchClaim::kStored:
        w->result = AppendResult{.duplicate = true, .durable = true};
        break;
      case store::JobStore::BatchClaim::kInFlight:
        w->result = InFlightError(w->batch_id);
        break;
      case store::JobStore::BatchClaim::kCredentialRefused:
        w->result =
            UnauthenticatedError("the compute credential of batch " + std::string(w->batch_id) +
                                 " is revoked or unknown; nothing of it was stored")
                .WithReason("credential_revoked");
        break;
      case store::JobStore::BatchClaim::kClaimed:
        claimed.push_back(w);
        to_send.push_back(w->batch);
        claimed_ids.push_back(w->batch_id);
        break;
    }
  }
  if (claimed.empty())
    return marked;
  // Send adds the token, as to every request of the store.
  std::string body = EncodeWriteRequest(to_send);
  const auto write_start = std::chrono::steady_clock::now();
  Result<net::HttpResponse> response =
      Send(RemoteWriteRequest(options_.write_url, std::move(body), ""));
  const double write_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - write_start).count();
  Status written = response.ok() ? AnswerStatus(*response, "a remote write") : response.status();
  {
    std::lock_guard lock(write_mu_);
    ++counted_.groups;
    counted_.group_batches += claimed.size();
    counted_.write_seconds += write_seconds;
    if (!written.ok())
      ++counted_.failed_writes;
  }
  if (written.ok()) {
    // Batches already waiting make a next group soon: its claim marks these (see Append). A
    // bound keeps a run of failing claims from piling marks up; past it they are marked now.
    bool deferred = false;
    {
      std::lock_guard lock(write_mu_);
      if (!waiting_.empty() && unmarked_.size() + claimed_ids.size() <= kMaxUnmarked) {
        unmarked_.insert(claimed_ids.begin(), claimed_ids.end());
        deferred = true;
      }
    }
    if (!deferred)
      written = batches_.MarkIngestBatchesStored(claimed_ids, clock_.NowMs());
  } else {
    // The retries may reach a healthy store.
    (void)batches_.ReleaseIngestBatches(claimed_ids, claimed_at_ms);
  }
  for (Writer* w : claimed) {
    if (written.ok())
      w->result = AppendResult{.samples = w->samples, .durable = true};
    else
      w->result = written;
  }
  return marked;
}

Status RemoteTelemetryStore::CheckSeriesLimit(const tsdb::Batch& /*batch*/) {
  return OkStatus();  // the remote store's own limit applies (see the header)
}

Result<tsdb::TelemetryStore::Durability> RemoteTelemetryStore::SyncAll() { return durability(); }

tsdb::TelemetryStore::Durability RemoteTelemetryStore::durability() {
  return Durability{.epoch = epoch_, .durable_mark = 0};
}

RemoteTelemetryStore::Stats RemoteTelemetryStore::stats() {
  std::lock_guard lock(write_mu_);
  Stats now = counted_;
  now.waiting_batches = waiting_.size();
  now.unmarked_batches = unmarked_.size();
  return now;
}

RemoteTelemetryStore::RemoteTelemetryStore(RemoteTelemetryOptions options, store::JobStore& batches,
                                           Clock& clock)
    : options_(std::move(options)), batches_(batches), clock_(clock) {}

RemoteTelemetryStore::~RemoteTelemetryStore() {
  {
    std::lock_guard lock(write_mu_);
    closing_ = true;
  }
  helper_cv_.notify_all();
  for (std::thread& helper : helpers_)
    helper.join();  // a helper writing a group finishes it (bounded by the request timeout)
  if (Status s = Flush(); !s.ok())
    std::fprintf(stderr, "expanse-server: marking written batches: %s\n", s.ToString().c_str());
}

Status RemoteTelemetryStore::Flush() {
  std::vector<std::string> marks;
  {
    std::lock_guard lock(write_mu_);
    while (!unmarked_.empty())
      marks.push_back(std::move(unmarked_.extract(unmarked_.begin()).value()));
  }
  if (marks.empty())
    return OkStatus();
  // A statement names at most 1,000 batches; at most kMaxUnmarked are left over, plus those two
  // groups that failed their claims held.
  const std::vector<std::string_view> ids(marks.begin(), marks.end());
  Status marked = batches_.MarkIngestBatchesStored(ids, clock_.NowMs());
  // kNotFound: some were forgotten already; the others are marked.
  if (marked.code() == StatusCode::kNotFound)
    return OkStatus();
  if (!marked.ok()) {
    std::lock_guard lock(write_mu_);
    unmarked_.insert(marks.begin(), marks.end());
  }
  return marked;
}

Status RemoteTelemetryStore::ApplyRetention() {
  return batches_.ForgetIngestBatches(clock_.NowMs() - options_.batch_record_retention_ms).status();
}

Result<std::string> RemoteTelemetryStore::Get(
    const std::string& path, const std::vector<std::pair<std::string, std::string>>& form) {
  net::HttpRequest request;
  request.method = "POST";
  request.url = options_.query_url + path;
  request.headers = {{"Content-Type", "application/x-www-form-urlencoded"}};
  request.body = FormEncode(form);
  EXPANSE_ASSIGN_OR_RETURN(net::HttpResponse response, Send(std::move(request)));
  // The query API answers a query it will not run (400, 422: over its limits, or a query it
  // does not understand) with a JSON error document: not something a retry mends.
  if (response.status == 400 || response.status == 422) {
    const Result<std::vector<AnswerSeries>> refused = ParseQueryAnswer(response.body);
    return InternalError(refused.ok() ? "the telemetry store refused a query with " +
                                            std::to_string(response.status)
                                      : refused.status().message());
  }
  EXPANSE_RETURN_IF_ERROR(AnswerStatus(response, "a query"));
  return std::move(response.body);
}

Result<std::vector<tsdb::Bucket>> RemoteTelemetryStore::Query(const tsdb::SeriesKey& key,
                                                              int64_t from_ms, int64_t to_ms,
                                                              int points) {
  EXPANSE_ASSIGN_OR_RETURN(auto answers,
                           QueryMany({tsdb::SeriesQuery{key, from_ms, to_ms, points}}));
  return std::move(answers.front());
}

Result<std::vector<std::vector<tsdb::Bucket>>> RemoteTelemetryStore::QueryMany(
    const std::vector<tsdb::SeriesQuery>& queries) {
  // Queries that share compute, range and points share requests: a job's GPUs and metrics
  // are one question to the store.
  std::map<std::tuple<std::string, int64_t, int64_t, int>, std::vector<size_t>> groups;
  for (size_t i = 0; i < queries.size(); ++i) {
    const tsdb::SeriesQuery& q = queries[i];
    EXPANSE_RETURN_IF_ERROR(tsdb::Downsampler::Create(q.from_ms, q.to_ms, q.points).status());
    if (q.from_ms < 0)
      return InvalidArgumentError("query range starts before 1970: " + std::to_string(q.from_ms));
    groups[{q.key.compute_id, q.from_ms, q.to_ms, q.points}].push_back(i);
  }
  std::vector<std::vector<tsdb::Bucket>> answers(queries.size());
  std::vector<const std::vector<size_t>*> work;
  for (const auto& [group, members] : groups)
    work.push_back(&members);
  // A page of the job list is a group per job: the groups go out over the pool's connections
  // at once. Each group writes only its own queries' answers.
  const size_t threads = std::min(work.size(), static_cast<size_t>(options_.connections));
  if (threads <= 1) {
    for (const std::vector<size_t>* members : work)
      EXPANSE_RETURN_IF_ERROR(QueryGroup(queries, *members, answers));
    return answers;
  }
  std::atomic<size_t> next{0};
  std::mutex error_mu;
  Status error;
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < work.size(); i = next++) {
        Status s = QueryGroup(queries, *work[i], answers);
        if (!s.ok()) {
          std::lock_guard lock(error_mu);
          if (error.ok())
            error = std::move(s);
          next = work.size();  // the others stop at their next group
        }
      }
    });
  }
  for (std::thread& t : pool)
    t.join();
  EXPANSE_RETURN_IF_ERROR(error);
  return answers;
}

namespace {

// The figures of one bucket as they arrive, one aggregate at a time.
struct PartialBucket {
  double min = NAN, max = NAN, mean = NAN, last = NAN;
  double count = 0;
};

// Where each answer series goes: the queries of the group with its metric, host and GPU.
using SeriesIndex =
    std::map<std::tuple<std::string, std::string, std::string>, std::vector<size_t>>;

std::string Label(const AnswerSeries& series, const char* name) {
  const auto it = series.labels.find(name);
  return it == series.labels.end() ? std::string() : it->second;
}

// Files the points of `answer` into `grid` (per query of the group, per bucket). A point at
// time t is the bucket whose window ends at t: index (t + 1 - first_end) / width, for
// points of a range query; `fixed_index` for the one point of an instant query.
Status FileAnswer(const std::vector<AnswerSeries>& answer, const SeriesIndex& index,
                  int64_t first_end_ms, int64_t width_ms, int64_t fixed_index, size_t buckets,
                  std::map<size_t, std::vector<PartialBucket>>& grid) {
  for (const AnswerSeries& series : answer) {
    const auto to = index.find(
        {Label(series, "__name__"), Label(series, kHostLabel), Label(series, kDeviceLabel)});
    if (to == index.end())
      continue;  // of the selector's product, not asked for
    const std::string aggregate = Label(series, kAggregateLabel);
    for (const auto& [t_ms, value] : series.points) {
      int64_t i = fixed_index;
      if (i < 0) {
        const int64_t offset = t_ms - first_end_ms;
        if (offset < 0 || offset % width_ms != 0)
          return InternalError("the telemetry store answered a point off the buckets' grid");
        i = offset / width_ms;
      }
      if (i < 0 || static_cast<size_t>(i) >= buckets)
        return InternalError("the telemetry store answered a point outside the query");
      for (const size_t q : to->second) {
        PartialBucket& b = grid[q][static_cast<size_t>(i)];
        if (aggregate == "min")
          b.min = value;
        else if (aggregate == "max")
          b.max = value;
        else if (aggregate == "mean")
          b.mean = value;
        else if (aggregate == "last")
          b.last = value;
        else if (aggregate == "count")
          b.count = value;
      }
    }
  }
  return OkStatus();
}

}  // namespace

Status RemoteTelemetryStore::QueryGroup(const std::vector<tsdb::SeriesQuery>& queries,
                                        const std::vector<size_t>& members,
                                        std::vector<std::vector<tsdb::Bucket>>& answers) {
  const tsdb::SeriesQuery& first = queries[members.front()];
  const int64_t from = first.from_ms, to = first.to_ms;
  // downsample.h's grid: width ceil(span / points), as many buckets as it takes to reach to.
  const auto span = static_cast<uint64_t>(to - from);
  const auto width = static_cast<int64_t>(span / static_cast<uint64_t>(first.points) +
                                          (span % static_cast<uint64_t>(first.points) != 0));
  const auto buckets =
      static_cast<size_t>((span + static_cast<uint64_t>(width) - 1) / static_cast<uint64_t>(width));
  const bool last_partial = from + static_cast<int64_t>(buckets) * width > to;
  const size_t full = buckets - (last_partial ? 1 : 0);

  std::vector<tsdb::SeriesKey> keys;
  SeriesIndex index;
  for (const size_t q : members) {
    const tsdb::SeriesKey& key = queries[q].key;
    auto& targets = index[{MetricName(key.metric), key.host, key.device}];
    if (targets.empty())
      keys.push_back(key);
    targets.push_back(q);
  }
  const std::string selector = SeriesSelector(keys);
  std::map<size_t, std::vector<PartialBucket>> grid;
  for (const size_t q : members)
    grid[q].resize(buckets);

  // The full buckets, in range queries of at most max_points_per_request evaluation times.
  // Bucket i is [from + i*w, from + (i+1)*w): the window of w ms ending at from + (i+1)*w - 1
  // (a PromQL window includes its end and not its start).
  const std::string full_query = BucketAggregatesQuery(selector, width);
  const auto step = static_cast<size_t>(options_.max_points_per_request);
  for (size_t begin = 0; begin < full; begin += step) {
    const size_t end = std::min(full, begin + step);
    const int64_t first_end = from + static_cast<int64_t>(begin + 1) * width - 1;
    const int64_t last_end = from + static_cast<int64_t>(end) * width - 1;
    EXPANSE_ASSIGN_OR_RETURN(const std::string body,
                             Get("/api/v1/query_range", {{"query", full_query},
                                                         {"start", ApiTime(first_end)},
                                                         {"end", ApiTime(last_end)},
                                                         {"step", std::to_string(width) + "ms"},
                                                         {"nocache", "1"}}));
    EXPANSE_ASSIGN_OR_RETURN(const std::vector<AnswerSeries> answer, ParseQueryAnswer(body));
    // Grid index of the chunk's first point: `begin`; FileAnswer counts from first_end of 0.
    EXPANSE_RETURN_IF_ERROR(FileAnswer(answer, index, from + width - 1, width, -1, buckets, grid));
  }
  // The last bucket, cut short by `to`: one instant query over [its start, to).
  if (last_partial) {
    const int64_t start = from + static_cast<int64_t>(buckets - 1) * width;
    EXPANSE_ASSIGN_OR_RETURN(
        const std::string body,
        Get("/api/v1/query", {{"query", BucketAggregatesQuery(selector, to - start)},
                              {"time", ApiTime(to - 1)},
                              {"nocache", "1"}}));
    EXPANSE_ASSIGN_OR_RETURN(const std::vector<AnswerSeries> answer, ParseQueryAnswer(body));
    EXPANSE_RETURN_IF_ERROR(
        FileAnswer(answer, index, 0, 1, static_cast<int64_t>(buckets - 1), buckets, grid));
  }

  for (const size_t q : members) {
    std::vector<tsdb::Bucket>& out = answers[q];
    const std::vector<PartialBucket>& cells = grid[q];
    for (size_t i = 0; i < cells.size(); ++i) {
      const PartialBucket& b = cells[i];
      if (!(b.count >= 1))
        continue;  // no samples: no bucket, as downsample.h
      const int64_t start = from + static_cast<int64_t>(i) * width;
      out.push_back(
          tsdb::Bucket{.start_ms = start,
                       .end_ms = std::min(start + width, to),
                       .min = b.min,
                       .max = b.max,
                       .mean = b.mean,
                       .last = b.last,
                       .count = static_cast<uint32_t>(std::min(b.count, 4'294'967'295.0))});
    }
  }
  return OkStatus();
}

}  // namespace expanse::promstore
