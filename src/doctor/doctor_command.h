// `expanse-daemon doctor` (and `expanse doctor`, which runs it): gathers the deployment's facts
// on the controller (gather.h), judges them (checks.h) and prints the findings with their
// fixes, as text or as JSON (docs/formats/doctor.md). Exit status: 0 nothing needs action,
// 1 something does, 2 the doctor could not run.
#ifndef EXPANSE_DOCTOR_DOCTOR_COMMAND_H_
#define EXPANSE_DOCTOR_DOCTOR_COMMAND_H_

#include <ostream>
#include <string>

#include "core/host.h"
#include "doctor/gather.h"

namespace expanse::doctor {

struct DoctorCommandOptions {
  GatherOptions gather;  // probe left null: the command asks the planes over HTTPS itself
  std::string env_file;  // daemon.env: the CA bundle and proxy the controller uses
  bool json = false;
  bool probe_planes = true;
};

int RunDoctorCommand(const DoctorCommandOptions& options, Host& host, std::ostream& out,
                     std::ostream& err);

// The HTTPS probe: one request with the credential as bearer, its status and error code.
PlaneProbe HttpPlaneProbe(const std::string& ca_file, const std::string& https_proxy,
                          const std::string& no_proxy);

}  // namespace expanse::doctor

#endif  // EXPANSE_DOCTOR_DOCTOR_COMMAND_H_
