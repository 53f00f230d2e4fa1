// Test-only: making system calls fail the way a kernel or a sandbox would, in a forked child,
// so that a test can drive the paths a real failure takes (a full disk, a missing openat2)
// without touching the test process itself.
//
//   const int status = InChild([] {
//     if (!FailSyscalls({SYS_openat2}, ENOSYS)) return kCannotInject;
//     return TheCodeUnderTest() ? 0 : 1;
//   });
//   ASSERT_NE(status, kCannotInject) << "seccomp is not available here";
//   EXPECT_EQ(status, 0);
#ifndef EXPANSE_CORE_TEST_FAILING_SYSCALLS_H_
#define EXPANSE_CORE_TEST_FAILING_SYSCALLS_H_

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::testing {

// What a child exits with when this kernel or sandbox does not let it install the filter.
inline constexpr int kCannotInject = 77;

// From now on, in this (single-threaded, forked) process, each of `calls` fails with `error`.
inline bool FailSyscalls(std::initializer_list<long> calls, int error) {
  std::vector<sock_filter> filter;
  filter.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
  for (const long call : calls) {
    filter.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(call), 0, 1));
    filter.push_back(BPF_STMT(
        BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<uint32_t>(error) & SECCOMP_RET_DATA)));
  }
  filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  const sock_fprog program{static_cast<unsigned short>(filter.size()), filter.data()};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

// Runs `child` in a forked process; its return value is the exit status (128 + the signal
// when it was killed).
template <typename Fn>
int InChild(Fn child) {
  const pid_t pid = ::fork();
  if (pid == 0)
    ::_exit(child());
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace expanse::testing

#endif  // EXPANSE_CORE_TEST_FAILING_SYSCALLS_H_
