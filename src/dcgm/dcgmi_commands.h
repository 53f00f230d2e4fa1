// The `dcgmi` command lines Expanse runs (docs/formats/dcgmi.md). Options arrive from the
// daemon's configuration (EXPANSE_DCGMI, EXPANSE_DCGM_HOST); nothing here reads the environment.
#ifndef EXPANSE_DCGM_DCGMI_COMMANDS_H_
#define EXPANSE_DCGM_DCGMI_COMMANDS_H_

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace expanse::dcgm {

struct DcgmiOptions {
  std::string dcgmi = "dcgmi";          // the operator's client: a path, or a name on PATH
  std::string host = "localhost:5555";  // --host: "name[:port]", or "unix:///path" for a socket
  std::chrono::milliseconds interval{1000};  // dmon -d
};

// dcgmi dmon --host <host> -e <ids> -d <ms>: all GPUs, forever (no -c), one row per GPU per
// interval. The ids in the order given are the columns DmonParser expects.
std::vector<std::string> DmonArgv(const DcgmiOptions& options, std::span<const uint16_t> field_ids);

// dcgmi health --host <host> -c -j: check the all-GPUs group's watches, as JSON.
std::vector<std::string> HealthCheckArgv(const DcgmiOptions& options);

// dcgmi health --host <host> -s a: watch every system on the all-GPUs group. This replaces the
// systems an operator may have chosen for that group, so it is meant for when a check says no
// watch is set ("health_watches_not_enabled"); the watches outlive dcgmi, and the memory,
// NVLink, PCIe and thermal ones need about 60 s of samples before a check means anything.
std::vector<std::string> HealthSetArgv(const DcgmiOptions& options);

// dcgmi discovery --host <host> -l: GPU ids, names, bus ids and UUIDs.
std::vector<std::string> DiscoveryArgv(const DcgmiOptions& options);

}  // namespace expanse::dcgm

#endif  // EXPANSE_DCGM_DCGMI_COMMANDS_H_
