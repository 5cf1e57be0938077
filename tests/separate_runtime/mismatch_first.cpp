// The first file of separate_runtime:configuration_mismatch_at_O0: the runtime's configuration
// (host, as runtime.cpp here), compiled at -O0 like the rest of that program, linked before
// mismatch_main.cpp. Its out-of-line copy of registry::instance() is the one the linker keeps, so
// only mismatch_main.cpp's own reference to its configuration (backend/registry.hpp) fails the link.
#define LOCUS_SEPARATE_RUNTIME 1
#include <locus/locus.hpp>

int first_gpu_count() { return locus::gpu_count(); }
