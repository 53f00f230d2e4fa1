// Sign-in timing: does a wrong password for a known account take as long as any password for
// an unknown email? ControlPlane::Login checks the password against a fixed hash for unknown
// emails so that the two match (docs/api.md, "Sign-in"); this program prints both times and
// their ratio, which should be close to 1. A plain program, not a Google Benchmark: run it
// from a Release build, `bench_login_timing [rounds] [--minimum-cost]`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/clock.h"
#include "server/control_plane.h"
#include "store/sqlite_store.h"
#include "store/store.h"

namespace {

using expanse::server::ControlPlane;

double MedianMs(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// Milliseconds of one failed sign-in as `email`.
double TimeLogin(ControlPlane& control, const std::string& email) {
  const auto start = std::chrono::steady_clock::now();
  const auto login = control.Login(email, "not-the-password", "192.0.2.1");
  const auto end = std::chrono::steady_clock::now();
  if (login.ok()) {
    std::fprintf(stderr, "bench_login_timing: a wrong password was accepted\n");
    std::exit(1);
  }
  return std::chrono::duration<double, std::milli>(end - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 20;
  expanse::crypto::PasswordHashCost cost = expanse::crypto::InteractiveCost();
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--minimum-cost") == 0) {
      cost = expanse::crypto::MinimumCost();
    } else {
      rounds = std::max(1, std::atoi(argv[i]));
    }
  }
  auto store = expanse::store::OpenSqliteStore({.path = ":memory:"});
  if (!store.ok()) {
    std::fprintf(stderr, "bench_login_timing: %s\n", store.status().ToString().c_str());
    return 1;
  }
  expanse::SystemClock clock;
  expanse::server::ControlPlaneOptions options;
  options.password_cost = cost;
  ControlPlane control(**store, clock, options);
  auto boot =
      control.Bootstrap("bench", "Bench", "known@bench.example", "the-real-password", "bench");
  if (!boot.ok()) {
    std::fprintf(stderr, "bench_login_timing: %s\n", boot.status().ToString().c_str());
    return 1;
  }
  // Warm-up: the first unknown email also computes the fixed hash once.
  TimeLogin(control, "unknown@bench.example");
  TimeLogin(control, "known@bench.example");
  std::vector<double> known, unknown;
  for (int i = 0; i < rounds; ++i) {  // interleaved, so drift affects both alike
    known.push_back(TimeLogin(control, "known@bench.example"));
    unknown.push_back(TimeLogin(control, "unknown" + std::to_string(i) + "@bench.example"));
  }
  const double known_ms = MedianMs(known);
  const double unknown_ms = MedianMs(unknown);
  std::printf("rounds                     %d\n", rounds);
  std::printf("known email, wrong password  median %.2f ms\n", known_ms);
  std::printf("unknown email                median %.2f ms\n", unknown_ms);
  std::printf("ratio known/unknown          %.3f\n", known_ms / unknown_ms);
  return 0;
}
