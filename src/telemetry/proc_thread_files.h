// Parsers of the two /proc files the sampler reads per job thread (telemetry/job_threads.h).
// The kernel writes them, but a thread names itself (prctl, pthread_setname_np): its name sits
// inside /proc/<tid>/task/<tid>/stat between parentheses and may hold spaces and parentheses,
// so the files are read as the job's input, never trusted further than their shape.
#ifndef EXPANSE_TELEMETRY_PROC_THREAD_FILES_H_
#define EXPANSE_TELEMETRY_PROC_THREAD_FILES_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace expanse::telemetry {

// The state letter of a thread's stat line ("R", "S", "D", ...): the character after the
// line's last ")" and one space, or 0 when there is none.
char ParseThreadState(std::string_view stat);

// The second field of a thread's schedstat ("<ns on a CPU> <ns waiting on a run queue>
// <timeslices>"): ns it waited on a run queue. Unsigned decimal fields separated by single
// spaces; nullopt for anything else (a sign, an overflow, a missing field).
std::optional<uint64_t> ParseRunQueueWaitNs(std::string_view schedstat);

}  // namespace expanse::telemetry

#endif  // EXPANSE_TELEMETRY_PROC_THREAD_FILES_H_
