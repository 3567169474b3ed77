#include "exit_code.hpp"
