// A separate-runtime program with emulated GPUs linked against a runtime file compiled without
// them (runtime.cpp, built by this target with no definitions): it must not link, and the error
// names the configuration the runtime file lacks. Built by the test
// separate_runtime:configuration_mismatch only (expect_failure.cmake).
// expect: runtime_configuration_emulated_gpus
#define LOCUS_EMULATE_GPUS 1
#define LOCUS_SEPARATE_RUNTIME 1
#include <locus/locus.hpp>

int main() { return locus::gpu_count() == 2 ? 0 : 1; }
