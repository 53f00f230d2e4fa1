// What the fake libcupti's callback half (fake_cupti_callbacks.cc) needs of its Activity API half
// (fake_cupti_activity.cc).
#ifndef EXPANSE_TESTS_FAKES_CUPTI_FAKE_CUPTI_ACTIVITY_H_
#define EXPANSE_TESTS_FAKES_CUPTI_FAKE_CUPTI_ACTIVITY_H_

#include <atomic>
#include <cstdint>

#include "fake_cupti_scenario.h"

namespace expanse_fake_cupti {

// True from the first call that initialises CUPTI (registering activity callbacks, enabling a
// kind, subscribing) to cuptiFinalize: while it is, every API call of the job pays CUPTI's cost.
extern std::atomic<bool> g_attached;

// cuptiFinalize's share of the Activity API: callbacks, enabled kinds and records not flushed
// yet (including those of iterations that ran since the last flush) are dropped; returns how many
// records were lost that way.
uint64_t FinalizeActivity(const ActivityScenario& activity);

// Contexts with PC sampling enabled (fake_cupti_pcsampling.cc); only while a Call is alive.
size_t PcSamplingEnabledContexts();

}  // namespace expanse_fake_cupti

#endif  // EXPANSE_TESTS_FAKES_CUPTI_FAKE_CUPTI_ACTIVITY_H_
