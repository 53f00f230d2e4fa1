#include "server/ingest_batch.h"

#include <zstd.h>

#include <bit>
#include <optional>
#include <string>

#include <gtest/gtest.h>

namespace expanse::server {
namespace ingest_batch_test {
namespace {

std::string Zstd(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3);
  out.resize(n);
  return out;
}

constexpr char kBatch[] = R"({
  "version": 1, "stream": "telemetry", "sequence": 7,
  "series": [{"host": "worker2", "device": "GPU-8f2c", "metric": "gpu.sm_util",
              "t0": 1800000000000, "dt": [0, 1000, 1000], "v": [0, 87.5, 91]},
             {"host": "worker2", "metric": "node.cpu_util", "t0": 1800000000000, "dt": [0],
              "v": [12]}],
  "jobs": [{"job_id": "123_4", "state": "RUNNING", "user": "ana", "req_gpus": 2,
            "start_ms": 1799999990000, "observed_ms": 1800000000000}],
  "job_events": [{"job_id": "123_4", "host": "worker2", "kind": "start", "at_ms": 1799999990000}],
  "gpu_allocations": [{"job_id": "123_4", "host": "worker2", "gpu_uuid": "GPU-8f2c",
                       "gpu_index": 0, "gpu_minor": 2, "from_ms": 1799999990000}]})";

TEST(IngestBatchTest, ParsesEverySection) {
  auto b = ParseIngestBatch(kBatch, "cmp_1");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->BatchId("cmp_1"), "cmp_1/telemetry/7");
  ASSERT_EQ(b->series.size(), 2u);
  EXPECT_EQ(b->samples, 4u);
  const auto& [key, samples] = b->series[0];
  EXPECT_EQ(key.compute_id, "cmp_1");
  EXPECT_EQ(key.device, "GPU-8f2c");
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[2].t_ms, 1800000002000);
  EXPECT_EQ(samples[1].v, 87.5);
  ASSERT_EQ(b->jobs.size(), 1u);
  EXPECT_EQ(b->jobs[0].req_gpus, 2);
  EXPECT_EQ(b->jobs[0].compute_id, "cmp_1");
  EXPECT_EQ(b->job_events[0].kind, "start");
  EXPECT_EQ(b->gpu_allocations[0].gpu_minor, 2);
}

// A heterogeneous job's component ("123+1") names its own series; '+' is allowed in a device.
TEST(IngestBatchTest, AcceptsAHetComponentsJobSeries) {
  auto b = ParseIngestBatch(R"({"version": 1, "stream": "telemetry", "sequence": 1,
      "series": [{"host": "w1", "device": "job/123+1", "metric": "job.cpu_used_cores",
                  "t0": 1800000000000, "dt": [0], "v": [1.5]}]})",
                            "cmp_1");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->series[0].key.device, "job/123+1");
  auto bad = ParseIngestBatch(R"({"version": 1, "stream": "telemetry", "sequence": 1,
      "series": [{"host": "w1", "device": "job/1 2", "metric": "m", "t0": 1, "dt": [0],
                  "v": [1]}]})",
                              "cmp_1");
  EXPECT_EQ(bad.status().reason(), "invalid_batch");
}

TEST(IngestBatchTest, DecodesZstdAndJson) {
  EXPECT_EQ(*DecodeIngestBody("application/zstd", Zstd(kBatch)), kBatch);
  EXPECT_EQ(*DecodeIngestBody("application/json; charset=utf-8", kBatch), kBatch);
}

TEST(IngestBatchTest, RefusesTruncatedOrCorruptOrUnknownBodies) {
  std::string z = Zstd(kBatch);
  EXPECT_EQ(DecodeIngestBody("application/zstd", z.substr(0, z.size() / 2)).status().reason(),
            "truncated_body");
  EXPECT_EQ(DecodeIngestBody("application/zstd", "").status().reason(), "truncated_body");
  EXPECT_EQ(DecodeIngestBody("application/zstd", "not zstd at all").status().reason(),
            "corrupt_body");
  EXPECT_EQ(DecodeIngestBody("text/plain", kBatch).status().reason(), "unsupported_media_type");
}

// One frame compressed in streaming mode: no decoded size in its header unless `pledged`.
std::string ZstdStream(const std::string& text, int window_log = 0) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
  if (window_log != 0)
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, window_log);
  std::string out(ZSTD_compressBound(text.size()), '\0');
  ZSTD_outBuffer o{out.data(), out.size(), 0};
  ZSTD_inBuffer in{text.data(), text.size(), 0};
  EXPECT_EQ(ZSTD_compressStream2(cctx, &o, &in, ZSTD_e_end), 0u);
  ZSTD_freeCCtx(cctx);
  out.resize(o.pos);
  return out;
}

TEST(IngestBatchTest, DecompressionIsCapped) {
  const std::string text(kMaxIngestJsonBytes + 1, ' ');
  // Declared in the header (refused before decoding) or not (refused by the counting pass).
  for (const std::string& bomb : {Zstd(text), ZstdStream(text)}) {
    EXPECT_LT(bomb.size(), 1u << 20);
    auto r = DecodeIngestBody("application/zstd", bomb);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);  // answered 413
    EXPECT_EQ(r.status().reason(), "body_too_large");
    EXPECT_NE(r.status().message().find("64 MiB"), std::string::npos) << r.status();
  }
  // Exactly at the cap, with and without a declared size.
  const std::string full(kMaxIngestJsonBytes, ' ');
  EXPECT_EQ(DecodeIngestBody("application/zstd", Zstd(full))->size(), kMaxIngestJsonBytes);
  EXPECT_EQ(DecodeIngestBody("application/zstd", ZstdStream(full))->size(), kMaxIngestJsonBytes);
}

TEST(IngestBatchTest, RefusesFramesThatNeedAHugeWindow) {
  // A 32 MiB window would make the decoder allocate that much per worker thread.
  std::string text(40u << 20, 'a');
  for (size_t i = 0; i < text.size(); i += 4096)
    text[i] = static_cast<char>('a' + (i / 4096) % 26);
  auto r = DecodeIngestBody("application/zstd", ZstdStream(text, /*window_log=*/25));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "body_too_large");
  EXPECT_NE(r.status().message().find("window"), std::string::npos) << r.status();
  // The daemon's own frames (level 3, a one-shot compress) decode.
  EXPECT_EQ(DecodeIngestBody("application/zstd", Zstd(kBatch))->size(), sizeof(kBatch) - 1);
}

TEST(IngestBatchTest, RefusesDeepNestingInTheFullParser) {
  const std::string deep = R"({"version":1,"stream":"telemetry","sequence":1,"series":[],"x":)" +
                           std::string(100'000, '[') + std::string(100'000, ']') + "}";
  EXPECT_FALSE(ParseCommonIngestBatch(deep, "cmp_1").has_value());
  auto r = ParseIngestBatch(deep, "cmp_1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "json_too_deep");
  EXPECT_EQ(r.status().message(),
            "batch: the document nests arrays and objects deeper than 16 levels");
}

// The single-pass parser must give exactly what the DOM parser gives. An unknown key makes
// ParseIngestBatch fall back to the DOM parser, which ignores it.
TEST(IngestBatchTest, FastPathMatchesTheFullParserBitForBit) {
  const std::string docs[] = {
      R"({"version":1,"stream":"telemetry","sequence":18446744073709551,"series":[
          {"host":"node-1.a_b","device":"GPU-8f2c:0/x+1","metric":"gpu.sm_util","t0":1800000000000,
           "dt":[0,1000,86400000,0],"v":[0,-0,87.5,1e300]},
          {"metric":"node.cpu_util","v":[-0.0, 0.1, 3.14159265358979323846, 9007199254740993],
           "dt":[5,5,5,5],"host":"W2"},
          {"host":"h","metric":"m","dt":[],"v":[]},
          {"host":"h","metric":"m","t0":0,"device":"","dt":[1],"v":[-1.5E-7]}],
         "jobs":[],"job_events":[ ],"gpu_allocations":[],"stacks":[]})",
      " \n{ \"sequence\" : 0 , \"stream\" : \"s-_1\" , \"version\" : 1 } \t",
      R"({"version":1,"stream":"t","sequence":3,"series":[]})",
      // Integers at the edges of the one-pass reading (18 digits) and past it (19, the
      // int64 limits), zeros, and numbers ended by spaces.
      R"({"version":1,"stream":"t","sequence":9223372036854775807,"series":[{"host":"h",
          "metric":"m","t0":180000000000,"dt":[0 ,1, 999999 ,0,0,0,0,0],
          "v":[999999999999999999,1000000000000000000,-9223372036854775808,9223372036854775807,
               0 , -0,-999999999999999999 ,123456789012345678.5]}]})",
  };
  for (const std::string& doc : docs) {
    SCOPED_TRACE(doc);
    std::optional<IngestBatch> fast = ParseCommonIngestBatch(doc, "cmp_1");
    ASSERT_TRUE(fast.has_value());
    std::string with_unknown_key = doc;
    with_unknown_key.insert(with_unknown_key.find('{') + 1, R"("x":null,)");
    ASSERT_FALSE(ParseCommonIngestBatch(with_unknown_key, "cmp_1").has_value());
    auto full = ParseIngestBatch(with_unknown_key, "cmp_1");
    ASSERT_TRUE(full.ok()) << full.status();
    EXPECT_EQ(fast->stream, full->stream);
    EXPECT_EQ(fast->sequence, full->sequence);
    EXPECT_EQ(fast->samples, full->samples);
    ASSERT_EQ(fast->series.size(), full->series.size());
    for (size_t i = 0; i < fast->series.size(); ++i) {
      EXPECT_TRUE(fast->series[i].key == full->series[i].key) << i;
      ASSERT_EQ(fast->series[i].samples.size(), full->series[i].samples.size());
      for (size_t j = 0; j < fast->series[i].samples.size(); ++j) {
        EXPECT_EQ(fast->series[i].samples[j].t_ms, full->series[i].samples[j].t_ms);
        EXPECT_EQ(std::bit_cast<uint64_t>(fast->series[i].samples[j].v),
                  std::bit_cast<uint64_t>(full->series[i].samples[j].v))
            << i << "," << j;
      }
    }
  }
}

// What the fast path does not handle goes to the full parser: records, escapes, nulls.
TEST(IngestBatchTest, FastPathLeavesUnusualBatchesToTheFullParser) {
  EXPECT_FALSE(ParseCommonIngestBatch(kBatch, "cmp_1").has_value());
  for (const char* doc : {
           R"({"version":1,"stream":"t\u0065","sequence":1})",
           R"({"version":1,"stream":"t","sequence":1,"series":[{"host":"h","device":null,
               "metric":"m","dt":[0],"v":[1]}]})",
           R"({"version":1,"stream":"t","sequence":1,"sequence":2})",
           R"({"version":1.0,"stream":"t","sequence":1})",
           R"({"version":1,"stream":"t","sequence":1,"series":[{"host":"h","metric":"m",
               "dt":[-0],"v":[1]}]})",
       }) {
    EXPECT_FALSE(ParseCommonIngestBatch(doc, "cmp_1").has_value()) << doc;
  }
  // Valid all the same, through the full parser.
  auto escaped = ParseIngestBatch(R"({"version":1,"stream":"t\u0065","sequence":1})", "c");
  ASSERT_TRUE(escaped.ok()) << escaped.status();
  EXPECT_EQ(escaped->stream, "te");
}

// The batch's buffers are reserved from the document's size; a document padded with spaces
// (small once compressed) does not leave the batch holding that estimate while it waits.
TEST(IngestBatchTest, FastPathKeepsNoMoreThanTheBatchNeeds) {
  const std::string doc =
      R"({"version":1,"stream":"t","sequence":1,"series":[)" + std::string(4 << 20, ' ') +
      R"({"host":"w1","device":"GPU-1","metric":"m","t0":1,"dt":[0],"v":[1]}]})";
  std::optional<IngestBatch> batch = ParseCommonIngestBatch(doc, "cmp_1");
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->series.sample_count(), 1u);
  EXPECT_LT(batch->series.capacity_bytes(), 64u << 10);
}

// The fast path checks a host or device only when it differs from the last one that passed:
// a bad name after a good one is still refused, an empty one too.
TEST(IngestBatchTest, FastPathChecksEachNewNameAfterOnesThatPassed) {
  const auto doc = [](const char* second_host, const char* second_device) {
    return std::string(R"({"version":1,"stream":"t","sequence":1,"series":[)") +
           R"({"host":"w1","device":"GPU-1","metric":"m","t0":1,"dt":[0],"v":[1]},)" +
           R"({"host":")" + second_host + R"(","device":")" + second_device +
           R"(","metric":"m2","t0":1,"dt":[0],"v":[1]}]})";
  };
  std::optional<IngestBatch> same = ParseCommonIngestBatch(doc("w1", "GPU-1"), "cmp_1");
  ASSERT_TRUE(same.has_value());
  ASSERT_EQ(same->series.size(), 2u);
  EXPECT_EQ(same->series[1].key, (tsdb::SeriesKey{"cmp_1", "w1", "GPU-1", "m2"}));
  for (const auto& [host, device] : std::vector<std::pair<const char*, const char*>>{
           {"", "GPU-1"}, {"w 1", "GPU-1"}, {"w1", "GPU 1"}}) {
    EXPECT_FALSE(ParseCommonIngestBatch(doc(host, device), "cmp_1").has_value())
        << host << " " << device;
    EXPECT_FALSE(ParseIngestBatch(doc(host, device), "cmp_1").ok()) << host << " " << device;
  }
  // Before any name passed, an empty one is not taken for the last that did.
  EXPECT_FALSE(ParseCommonIngestBatch(R"({"version":1,"stream":"t","sequence":1,"series":[
      {"host":"","metric":"m","t0":1,"dt":[0],"v":[1]}]})",
                                      "cmp_1")
                   .has_value());
}

struct BadCase {
  std::string body;
  std::string field;
};

class IngestBatchRejectsTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(IngestBatchRejectsTest, NamesTheField) {
  EXPECT_FALSE(ParseCommonIngestBatch(GetParam().body, "cmp_1").has_value());
  auto b = ParseIngestBatch(GetParam().body, "cmp_1");
  ASSERT_FALSE(b.ok()) << GetParam().body;
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find(GetParam().field), std::string::npos) << b.status();
}

const std::string kHead = R"("version":1,"stream":"telemetry","sequence":1)";

INSTANTIATE_TEST_SUITE_P(
    Cases, IngestBatchRejectsTest,
    ::testing::Values(
        BadCase{"{", "not valid JSON"}, BadCase{R"({"version":2})", "batch.version"},
        BadCase{R"({"version":1,"stream":"Tele metry","sequence":1})", "batch.stream"},
        BadCase{R"({"version":1,"stream":"t","sequence":-1})", "batch.sequence"},
        BadCase{"{" + kHead + R"(,"series":{}})", "batch.series"},
        BadCase{"{" + kHead + R"(,"series":[{"host":"h","metric":"m","t0":1,"dt":[0],"v":["x"]}]})",
                "batch.series[0].v[0]"},
        BadCase{"{" + kHead + R"(,"series":[{"host":"h","metric":"m","t0":1,"dt":[0,1],"v":[1]}]})",
                "batch.series[0].v"},
        BadCase{"{" + kHead + R"(,"series":[{"host":"h","metric":"m","t0":1,"dt":[-5],"v":[1]}]})",
                "batch.series[0].dt[0]"},
        BadCase{"{" + kHead + R"(,"series":[{"host":"h","metric":"M; DROP","dt":[],"v":[]}]})",
                "batch.series[0].metric"},
        BadCase{"{" + kHead + R"(,"series":[{"host":"a b","metric":"m","dt":[],"v":[]}]})",
                "batch.series[0].host"},
        BadCase{"{" + kHead + R"(,"jobs":[{"state":"RUNNING"}]})", "batch.jobs[0].job_id"},
        BadCase{"{" + kHead + R"(,"jobs":[{"job_id":"1","state":"R","req_gpus":-2}]})",
                "batch.jobs[0].req_gpus"},
        BadCase{"{" + kHead + R"(,"jobs":[{"job_id":"1\u0000","state":"R"}]})",
                "batch.jobs[0].job_id"},
        BadCase{
            "{" + kHead + R"(,"job_events":[{"job_id":"1","host":"h","kind":"middle","at_ms":5}]})",
            "batch.job_events[0].kind"},
        BadCase{"{" + kHead + R"(,"job_events":[{"job_id":"1","host":"h","kind":"end"}]})",
                "batch.job_events[0].at_ms"},
        BadCase{
            "{" + kHead +
                R"(,"gpu_allocations":[{"job_id":"1","host":"h","gpu_uuid":"G","from_ms":9,"to_ms":3}]})",
            "batch.gpu_allocations[0].to_ms"}));

}  // namespace
}  // namespace ingest_batch_test
}  // namespace expanse::server
