#pragma once
// What the submit_*send.cpp files share; not part of the library's interface.
#include "gpuctl/kube/client.hpp"

namespace gpuctl::ops {

// How gpuctl submit creates what it built: strict field validation (a misspelt field is an error,
// not dropped), as field manager "gpuctl", with dryRun=All for a server dry run.
kube::WriteOptions strict_write(bool dry_run);

}  // namespace gpuctl::ops
