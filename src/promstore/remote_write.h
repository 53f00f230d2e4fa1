// The samples of an ingest batch as a Prometheus remote-write 1.0 request body: a WriteRequest
// protobuf, snappy block-compressed (docs/formats/remote-write.md).
//
// Each series keeps the labels of the embedded store's key. GPU series carry no job (jobs join
// through their GPU allocations, as everywhere in Expanse), so their count is nodes x GPUs x
// metrics however many jobs run; only a job's own cgroup series (job.cpu_used_cores, ...) are
// per job and host, and live as long as the job (docs/scaling.md counts them):
//   __name__  "expanse_" + the metric with '.' as '_'   (gpu.sm_util -> expanse_gpu_sm_util)
//   compute   the compute's id
//   host      the node
//   device    the GPU's UUID, or job/<job id>; absent for a host-level metric
#ifndef EXPANSE_PROMSTORE_REMOTE_WRITE_H_
#define EXPANSE_PROMSTORE_REMOTE_WRITE_H_

#include <string>
#include <string_view>
#include <vector>

#include "net/http_client.h"
#include "tsdb/sample.h"

namespace expanse::promstore {

// The label names above, for the queries that read the series back.
inline constexpr char kComputeLabel[] = "compute";
inline constexpr char kHostLabel[] = "host";
inline constexpr char kDeviceLabel[] = "device";

// "expanse_" + metric with every '.' replaced by '_'. Ingest allows letters, digits, '.' and
// '_' in a metric name, so the result is a valid Prometheus metric name.
std::string MetricName(std::string_view metric);

// The compressed request body for the samples of every batch. Series with no samples are left
// out.
std::string EncodeWriteRequest(const std::vector<const tsdb::Batch*>& batches);
inline std::string EncodeWriteRequest(const tsdb::Batch& batch) {
  return EncodeWriteRequest(std::vector<const tsdb::Batch*>{&batch});
}

// The POST of `body` to `url` with the headers a remote-write 1.0 receiver expects, and
// "Authorization: Bearer <bearer_token>" when the token is not empty.
net::HttpRequest RemoteWriteRequest(std::string url, std::string body,
                                    const std::string& bearer_token);

}  // namespace expanse::promstore

#endif  // EXPANSE_PROMSTORE_REMOTE_WRITE_H_
