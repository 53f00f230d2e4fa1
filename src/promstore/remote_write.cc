#include "promstore/remote_write.h"

#include <snappy.h>

#include <google/protobuf/arena.h>

#include "remote_write.pb.h"

namespace expanse::promstore {

std::string MetricName(std::string_view metric) {
  std::string name = "expanse_";
  name.reserve(name.size() + metric.size());
  for (const char c : metric)
    name.push_back(c == '.' ? '_' : c);
  return name;
}

namespace {

void AddLabel(wire::TimeSeries& series, std::string_view name, std::string_view value) {
  wire::Label* label = series.add_labels();
  label->set_name(std::string(name));
  label->set_value(std::string(value));
}

}  // namespace

std::string EncodeWriteRequest(const tsdb::Batch& batch) {
  // Every sample is a message of its own in remote-write's schema: on the heap that was one
  // allocation and one free per sample, a sixth of a replica's CPU. An arena allocates them in
  // a few blocks and frees them at once.
  google::protobuf::Arena arena;
  wire::WriteRequest& request = *google::protobuf::Arena::CreateMessage<wire::WriteRequest>(&arena);
  for (const auto& [key, samples] : batch) {
    if (samples.empty())
      continue;
    wire::TimeSeries* series = request.add_timeseries();
    // Receivers want the labels sorted by name: __name__, compute, device, host.
    AddLabel(*series, "__name__", MetricName(key.metric));
    AddLabel(*series, kComputeLabel, key.compute_id);
    if (!key.device.empty())
      AddLabel(*series, kDeviceLabel, key.device);
    AddLabel(*series, kHostLabel, key.host);
    series->mutable_samples()->Reserve(static_cast<int>(samples.size()));
    for (const tsdb::Sample& s : samples) {
      wire::Sample* out = series->add_samples();
      out->set_value(s.v);
      out->set_timestamp(s.t_ms);
    }
  }
  std::string serialized = request.SerializeAsString();
  std::string compressed;
  snappy::Compress(serialized.data(), serialized.size(), &compressed);
  return compressed;
}

net::HttpRequest RemoteWriteRequest(std::string url, std::string body,
                                    const std::string& bearer_token) {
  net::HttpRequest request;
  request.method = "POST";
  request.url = std::move(url);
  request.headers = {{"Content-Type", "application/x-protobuf"},
                     {"Content-Encoding", "snappy"},
                     {"X-Prometheus-Remote-Write-Version", "0.1.0"}};
  if (!bearer_token.empty())
    request.headers.emplace_back("Authorization", "Bearer " + bearer_token);
  request.body = std::move(body);
  return request;
}

}  // namespace expanse::promstore
