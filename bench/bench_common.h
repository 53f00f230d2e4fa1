// What the bench programs share: their timing helpers, and what those that read a job store
// start from (a SQLite store in `dir` holding one organisation and one SLURM compute; exits with
// a message on any failure, as they do). A plain header.
#ifndef EXPANSE_BENCH_BENCH_COMMON_H_
#define EXPANSE_BENCH_BENCH_COMMON_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "store/sqlite_store.h"
#include "store/store.h"

namespace expanse::bench {

inline double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// The middle value (the upper one of an even count); `values` must not be empty.
inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

inline std::unique_ptr<store::Store> OpenStoreWithCompute(const std::string& dir,
                                                          const std::string& compute_id,
                                                          int64_t now_ms) {
  const auto die = [](const char* what, const Status& status) {
    std::fprintf(stderr, "%s: %s\n", what, status.message().c_str());
    std::exit(2);
  };
  auto store = store::OpenSqliteStore({.path = dir + "/store.db"});
  if (!store.ok())
    die("OpenSqliteStore", store.status());
  auto org = (*store)->CreateOrganization("bench", "Bench", now_ms);
  if (!org.ok())
    die("CreateOrganization", org.status());
  store::Compute compute;
  compute.id = compute_id;
  compute.org_id = org->id;
  compute.name = "bench cluster";
  compute.type = "slurm";
  if (auto created = (*store)->CreateCompute(compute); !created.ok())
    die("CreateCompute", created.status());
  return *std::move(store);
}

}  // namespace expanse::bench

#endif  // EXPANSE_BENCH_BENCH_COMMON_H_
