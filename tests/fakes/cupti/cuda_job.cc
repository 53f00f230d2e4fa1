// A stand-in for a job's CUDA process: it loads libcuda.so.1 the way the CUDA runtime does
// (dlopen by soname, so LD_LIBRARY_PATH picks the fake), calls cuInit (where the driver injects
// CUDA_INJECTION64_PATH), then works for a while and prints a result that depends only on its
// arguments, so a test can check that an injected agent changed nothing the job does.
//
//   expanse-fake-cuda-job [--ms N] [--threads N] [--fork]
//
// --threads: N threads call cuInit at once (the driver injects once per process).
// --fork: a child is forked after cuInit and does the same work (a forked child cannot use CUDA;
// the agent must leave it alone). Exit status 0 unless the work itself fails.

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using CuInit = int (*)(unsigned int);

uint64_t Work(int ms) {
  // A checksum over a fixed amount of arithmetic per millisecond requested: the same result
  // however fast the machine is.
  uint64_t x = 1469598103934665603ULL;
  for (int i = 0; i < ms * 1000; ++i)
    x = (x ^ static_cast<uint64_t>(i)) * 1099511628211ULL;
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  int ms = 1000;
  int threads = 1;
  bool fork_child = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--ms") == 0 && i + 1 < argc) {
      ms = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--fork") == 0) {
      fork_child = true;
    } else {
      std::fprintf(stderr, "usage: %s [--ms N] [--threads N] [--fork]\n", argv[0]);
      return 2;
    }
  }
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cuda == nullptr) {
    std::fprintf(stderr, "libcuda.so.1: %s\n", dlerror());
    return 3;
  }
  auto cu_init = reinterpret_cast<CuInit>(dlsym(cuda, "cuInit"));
  if (cu_init == nullptr)
    return 3;
  std::vector<int> results(static_cast<size_t>(threads), -1);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] { results[static_cast<size_t>(t)] = cu_init(0); });
  for (auto& w : workers)
    w.join();
  std::printf("cuInit=%d\n", results[0]);
  pid_t child = -1;
  if (fork_child) {
    std::fflush(stdout);  // else the child would print the parent's buffered lines again
    child = fork();
    if (child == 0) {
      std::printf("child work=%llu\n", static_cast<unsigned long long>(Work(ms / 2)));
      std::fflush(stdout);
      _exit(0);
    }
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  uint64_t sum = 0;
  while (std::chrono::steady_clock::now() < until) {
    sum += Work(10);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::printf("work=%llu\n", static_cast<unsigned long long>(Work(ms)));
  if (child > 0) {
    int status = 0;
    waitpid(child, &status, 0);
    std::printf("child exit=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  return sum == 0 ? 4 : 0;  // `sum` only keeps the loop from being optimised away
}
