#include "promstore/remote_write.h"

#include <snappy.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <google/protobuf/io/coded_stream.h>

namespace expanse::promstore {

std::string MetricName(std::string_view metric) {
  std::string name = "expanse_";
  name.reserve(name.size() + metric.size());
  for (const char c : metric)
    name.push_back(c == '.' ? '_' : c);
  return name;
}

namespace {

using google::protobuf::io::CodedOutputStream;

// The field tags of remote_write.proto, (number << 3) | wire type (0 varint, 1 fixed 64-bit,
// 2 length-delimited); every one fits in one byte. The test holds the bytes written with them
// to the generated code's serialisation of the same request.
constexpr uint32_t kTimeSeriesTag = (1 << 3) | 2;   // WriteRequest.timeseries
constexpr uint32_t kLabelTag = (1 << 3) | 2;        // TimeSeries.labels
constexpr uint32_t kSampleTag = (2 << 3) | 2;       // TimeSeries.samples
constexpr uint32_t kLabelNameTag = (1 << 3) | 2;    // Label.name
constexpr uint32_t kLabelValueTag = (2 << 3) | 2;   // Label.value
constexpr uint32_t kSampleValueTag = (1 << 3) | 1;  // Sample.value, a double
constexpr uint32_t kSampleTimeTag = (2 << 3) | 0;   // Sample.timestamp, an int64

// A length-delimited field's size after its tag.
size_t Delimited(size_t bytes) {
  return CodedOutputStream::VarintSize32(static_cast<uint32_t>(bytes)) + bytes;
}

uint64_t Bits(double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

// proto3 leaves out a field that holds its default (0.0, 0), as the generated code does.
size_t SampleBytes(const tsdb::Sample& s) {
  return (Bits(s.v) != 0 ? 1 + 8 : 0) +
         (s.t_ms != 0 ? 1 + CodedOutputStream::VarintSize64(static_cast<uint64_t>(s.t_ms)) : 0);
}

size_t LabelBytes(std::string_view name, std::string_view value) {
  return (name.empty() ? 0 : 1 + Delimited(name.size())) +
         (value.empty() ? 0 : 1 + Delimited(value.size()));
}

// The labels of a series, sorted by name as receivers want them: __name__, compute, device
// (absent for a host-level metric, not empty), host.
template <typename Visit>
void ForEachLabel(const tsdb::SeriesKeyView& key, std::string_view metric_name, Visit visit) {
  visit("__name__", metric_name);
  visit(kComputeLabel, key.compute_id);
  if (!key.device.empty())
    visit(kDeviceLabel, key.device);
  visit(kHostLabel, key.host);
}

void NameInto(std::string_view metric, std::string& name) {
  name.assign("expanse_");
  for (const char c : metric)
    name.push_back(c == '.' ? '_' : c);
}

uint8_t* WriteDelimited(uint32_t tag, std::string_view bytes, uint8_t* out) {
  out = CodedOutputStream::WriteTagToArray(tag, out);
  out = CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(bytes.size()), out);
  return CodedOutputStream::WriteRawToArray(bytes.data(), static_cast<int>(bytes.size()), out);
}

}  // namespace

std::string EncodeWriteRequest(const std::vector<const tsdb::Batch*>& batches) {
  // The protobuf written straight from the batches with the library's encoder: building
  // remote-write's messages first (one per label and sample) cost a replica more than the
  // rest of the encoding. Two passes: the sizes every length prefix needs, then the bytes.
  std::string name;
  std::vector<size_t> series_bytes;
  size_t total = 0;
  for (const tsdb::Batch* batch : batches) {
    for (const auto& [key, samples] : *batch) {
      if (samples.empty())
        continue;
      NameInto(key.metric, name);
      size_t bytes = 0;
      ForEachLabel(key, name, [&](std::string_view n, std::string_view v) {
        bytes += 1 + Delimited(LabelBytes(n, v));
      });
      for (const tsdb::Sample& s : samples)
        bytes += 1 + Delimited(SampleBytes(s));
      series_bytes.push_back(bytes);
      total += 1 + Delimited(bytes);
    }
  }
  // Every byte is written below: no zeroing first (a group's request is ~100 KB).
  const std::unique_ptr<uint8_t[]> serialized = std::make_unique_for_overwrite<uint8_t[]>(total);
  uint8_t* out = serialized.get();
  size_t next = 0;
  for (const tsdb::Batch* batch : batches) {
    for (const auto& [key, samples] : *batch) {
      if (samples.empty())
        continue;
      out = CodedOutputStream::WriteTagToArray(kTimeSeriesTag, out);
      out =
          CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(series_bytes[next++]), out);
      NameInto(key.metric, name);
      ForEachLabel(key, name, [&](std::string_view n, std::string_view v) {
        out = CodedOutputStream::WriteTagToArray(kLabelTag, out);
        out = CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(LabelBytes(n, v)), out);
        if (!n.empty())
          out = WriteDelimited(kLabelNameTag, n, out);
        if (!v.empty())
          out = WriteDelimited(kLabelValueTag, v, out);
      });
      for (const tsdb::Sample& s : samples) {
        out = CodedOutputStream::WriteTagToArray(kSampleTag, out);
        out = CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(SampleBytes(s)), out);
        if (Bits(s.v) != 0) {
          out = CodedOutputStream::WriteTagToArray(kSampleValueTag, out);
          out = CodedOutputStream::WriteLittleEndian64ToArray(Bits(s.v), out);
        }
        if (s.t_ms != 0) {
          out = CodedOutputStream::WriteTagToArray(kSampleTimeTag, out);
          out = CodedOutputStream::WriteVarint64ToArray(static_cast<uint64_t>(s.t_ms), out);
        }
      }
    }
  }
  // The two passes agree by construction; were they ever not to, uninitialised heap bytes
  // would leave in the request, so this is checked rather than trusted.
  if (out != serialized.get() + total) {
    std::fprintf(stderr, "expanse: remote-write encoder sized %zu bytes, wrote %td\n", total,
                 out - serialized.get());
    std::abort();
  }
  // snappy::Compress would zero-fill a string of the worst-case size before compressing into
  // it (7 % of a replica's CPU); the compressed bytes, a fraction of that, are copied instead.
  const std::unique_ptr<char[]> compressed =
      std::make_unique_for_overwrite<char[]>(snappy::MaxCompressedLength(total));
  size_t compressed_bytes = 0;
  snappy::RawCompress(reinterpret_cast<const char*>(serialized.get()), total, compressed.get(),
                      &compressed_bytes);
  return std::string(compressed.get(), compressed_bytes);
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
