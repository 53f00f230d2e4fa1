// The callback API and detaching half of the fake libcupti.so.13: what a tool uses to learn of
// the job's CUDA calls and to take CUPTI out of the process again (cuptiFinalize, CUPTI's
// "dynamic detach"). The real CUPTI allows one subscriber per process and answers a second with
// CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (cuptiSubscribe_v2 also names the one that
// holds it); that is how the capture agent tells that the job's own profiler (Kineto, Nsight)
// is there. README.md ("Callbacks and detaching") has the details.
//
// The fake libcuda's API calls reach this library through cuptiFakeDriverApi, the stand-in for
// the private interface between the real driver and CUPTI: each counts as made with CUPTI
// attached (the job pays CUPTI's per-call cost) or detached, and a subscriber with the driver
// domain enabled gets its enter and exit callbacks on the calling thread.

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_result.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "fake_cupti_activity.h"
#include "fake_cupti_scenario.h"

namespace expanse_fake_cupti {

std::atomic<bool> g_attached{false};

}  // namespace expanse_fake_cupti

namespace {

using expanse_fake_cupti::Call;
using expanse_fake_cupti::g_attached;

// The one subscription, under g_mu (not the Call lock: the driver's hook takes only this one,
// and callbacks run with neither held, since they call back into the library).
std::mutex g_mu;
int g_handle_storage = 0;  // the handle's address is all a caller sees of it
const CUpti_SubscriberHandle g_handle = reinterpret_cast<CUpti_SubscriberHandle>(&g_handle_storage);
bool g_subscribed = false;
CUpti_CallbackFunc g_callback = nullptr;
void* g_userdata = nullptr;
std::string g_subscriber_name;
std::set<int> g_domains;

std::atomic<uint64_t> g_calls_attached{0};
std::atomic<uint64_t> g_calls_detached{0};
std::atomic<uint64_t> g_calls_since_attach{0};

// Set while this thread runs a subscriber's API-exit callback: cuptiFinalize says whether it
// was called from that site, the one NVIDIA recommends (no CUDA call of this thread in flight).
thread_local bool t_in_api_exit = false;

CUptiResult Subscribe(Call& call, CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                      void* userdata, CUpti_SubscriberParams* params) {
  if (subscriber == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  if (params != nullptr && params->structSize == 0)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  const std::string name =
      params != nullptr && params->subscriberName != nullptr
          ? std::string(params->subscriberName).substr(0, CUPTI_SUBSCRIBER_NAME_MAX_LEN)
          : "";
  if (!name.empty())
    call.AddDetail("name=" + name);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_subscribed) {
    call.AddDetail("held_by=" + g_subscriber_name);
    if (params != nullptr && params->oldSubscriberName != nullptr &&
        params->oldSubscriberSize > 0) {
      const std::string old = "CUPTI for " + g_subscriber_name;
      const size_t n = std::min(old.size(), params->oldSubscriberSize - 1);
      std::memcpy(params->oldSubscriberName, old.data(), n);
      params->oldSubscriberName[n] = '\0';
    }
    return call.Return(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  }
  g_subscribed = true;
  g_callback = callback;
  g_userdata = userdata;
  g_subscriber_name = name.empty() ? "unnamed" : name;
  g_domains.clear();
  if (!g_attached.exchange(true))
    g_calls_since_attach = 0;
  *subscriber = g_handle;
  return call.Return(CUPTI_SUCCESS);
}

}  // namespace

#define FAKE_EXPORT __attribute__((visibility("default")))

extern "C" {

// The fake's own entry points (not NVIDIA's): the driver's hook and the job's counts.
FAKE_EXPORT void cuptiFakeDriverApi(uint32_t callback_id, const char* function_name);
FAKE_EXPORT void cuptiFakeCallCounts(uint64_t* attached, uint64_t* detached);

FAKE_EXPORT CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber,
                                                CUpti_CallbackFunc callback, void* userdata) {
  Call call("cuptiSubscribe");
  return Subscribe(call, subscriber, callback, userdata, nullptr);
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber,
                                                   CUpti_CallbackFunc callback, void* userdata,
                                                   CUpti_SubscriberParams* params) {
  Call call("cuptiSubscribe_v2");
  return Subscribe(call, subscriber, callback, userdata, params);
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  Call call("cuptiUnsubscribe");
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_subscribed || subscriber != g_handle)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  call.AddDetail("name=" + g_subscriber_name);
  g_subscribed = false;
  g_callback = nullptr;
  g_domains.clear();
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable,
                                                   CUpti_SubscriberHandle subscriber,
                                                   CUpti_CallbackDomain domain) {
  Call call("cuptiEnableDomain");
  call.AddDetail("domain=" + std::to_string(static_cast<int>(domain)) +
                 (enable != 0 ? " on" : " off"));
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_subscribed || subscriber != g_handle || domain <= CUPTI_CB_DOMAIN_INVALID ||
      domain >= CUPTI_CB_DOMAIN_SIZE)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  if (enable != 0)
    g_domains.insert(static_cast<int>(domain));
  else
    g_domains.erase(static_cast<int>(domain));
  return call.Return(CUPTI_SUCCESS);
}

// Detaches: the subscription, the activity callbacks and every enabled kind are gone, and
// records not flushed yet are lost. The next CUPTI call attaches again (lazily, as the real
// library initialises itself).
FAKE_EXPORT CUptiResult CUPTIAPI cuptiFinalize(void) {
  Call call("cuptiFinalize");
  call.AddDetail(t_in_api_exit ? "site=api_exit" : "site=outside_api_callback");
  call.AddDetail("calls_while_attached=" + std::to_string(g_calls_since_attach.load()));
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_subscribed = false;
    g_callback = nullptr;
    g_domains.clear();
  }
  // CUPTI documents no teardown of PC sampling here: a caller must disable it first.
  if (const size_t enabled = expanse_fake_cupti::PcSamplingEnabledContexts(); enabled > 0)
    call.AddDetail("pc_enabled_at_finalize=" + std::to_string(enabled));
  const uint64_t lost = expanse_fake_cupti::FinalizeActivity(call.scenario().activity);
  if (lost > 0)
    call.AddDetail("records_lost=" + std::to_string(lost));
  g_attached = false;
  return call.Return(CUPTI_SUCCESS);
}

// The fake driver's hook for one API call of the job (fake_cuda.cc). Not traced: a job makes
// thousands a second.
FAKE_EXPORT void cuptiFakeDriverApi(uint32_t callback_id, const char* function_name) {
  if (g_attached.load()) {
    ++g_calls_attached;
    ++g_calls_since_attach;
  } else {
    ++g_calls_detached;
  }
  for (const CUpti_ApiCallbackSite site : {CUPTI_API_ENTER, CUPTI_API_EXIT}) {
    CUpti_CallbackFunc callback = nullptr;
    void* userdata = nullptr;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      if (!g_subscribed || g_domains.count(CUPTI_CB_DOMAIN_DRIVER_API) == 0)
        continue;
      callback = g_callback;
      userdata = g_userdata;
    }
    CUpti_CallbackData data{};
    data.callbackSite = site;
    data.functionName = function_name;
    t_in_api_exit = site == CUPTI_API_EXIT;
    callback(userdata, CUPTI_CB_DOMAIN_DRIVER_API, callback_id, &data);
    t_in_api_exit = false;
  }
}

// How many of the job's API calls found CUPTI attached and detached (the fake job prints them
// with --report-cupti).
FAKE_EXPORT void cuptiFakeCallCounts(uint64_t* attached, uint64_t* detached) {
  *attached = g_calls_attached.load();
  *detached = g_calls_detached.load();
}

}  // extern "C"
