#pragma once
// The one way gpuctl says dry-run, for every command that writes (kubectl's --dry-run values).
#include <string>

#include "gpuctl/kube/client.hpp"

namespace gpuctl::ops {

enum class DryRun {
  none,    // act
  client,  // plan and print what would be sent; send nothing
  server,  // send with dryRun=All: the API server validates and admits, persists nothing
};

// What a write sends: dryRun=All for a server dry run, gpuctl's field manager always.
inline kube::WriteOptions write_options(DryRun dry_run) {
  kube::WriteOptions w;
  w.dry_run = dry_run == DryRun::server;
  w.field_manager = "gpuctl";
  return w;
}

}  // namespace gpuctl::ops
