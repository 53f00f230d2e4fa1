// A stand-in for NVIDIA's libnvperf_host.so (see CMakeLists.txt): the fake libcupti only needs to
// find it, by soname, the way the real one does; this names the copy that was found.
extern "C" __attribute__((visibility("default"))) const char* ExpanseFakeNvperfHost();

const char* ExpanseFakeNvperfHost() { return "fake libnvperf_host.so"; }
