// gpuctl quota: registered here; the command arrives in a following commit.
#include "commands.hpp"

namespace gpuctl::cli {

void register_quota(CLI::App& /*app*/, AppContext& /*ctx*/) {}

}  // namespace gpuctl::cli
