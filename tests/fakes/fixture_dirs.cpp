// The two absolute folders the unit tests read, compiled into this file alone: were they -D
// definitions of every test source, each object would depend on where the repository lies, and a
// clone elsewhere (scripts/standalone-check, a CI checkout) could reuse none of them from ccache.
#include "fakes/fixtures.hpp"

namespace gpuctl::testing {

const char* fixtures_dir() { return GPUCTL_FIXTURES_DIR_PATH; }
const char* test_data_dir() { return GPUCTL_TEST_DATA_DIR_PATH; }

}  // namespace gpuctl::testing
