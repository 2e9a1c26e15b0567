// tcpadvise-config-check [--compile] FILE: checks a policy config with the
// very parser the shim uses. Prints "FILE:LINE:COLUMN: message" per mistake
// and exits 2, or a one-line summary of the rules and exits 0. With
// --compile, a good config is written to stdout compiled
// (config_compiled.h) instead of the summary. `tcpadvise config check` and
// `tcpadvise config compile` run it.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "config_compiled.h"

extern "C" int tcpadvise_load_config(const char* path, tcpadvise::PolicyConfig* config, char* errors,
                                     size_t errors_size);

static void Describe(const tcpadvise::PolicySettings& s, char* out, size_t size) {
  // cork and coalesce are adaptive unless the config says otherwise (adapt.h).
  const char* form = (s.cork || s.coalesce) && !s.adaptive ? " (fixed)" : "";
  snprintf(out, size, "%s%s%s%s%s%s%s", s.nodelay ? " nodelay" : "", s.cork ? " cork" : "",
           s.coalesce ? " coalesce" : "", form, s.quickack ? " quickack" : "", s.sndbuf ? " sndbuf" : "",
           s.rcvbuf ? " rcvbuf" : "");
  if (out[0] == '\0') snprintf(out, size, " observe");
}

// WriteCompiled writes config compiled to stdout; false when it could not.
static bool WriteCompiled(const tcpadvise::PolicyConfig& config) {
  static unsigned char bytes[tcpadvise::kMaxCompiledConfigSize];
  const size_t size = tcpadvise::EncodeCompiledConfig(config, bytes);
  return fwrite(bytes, 1, size, stdout) == size && fflush(stdout) == 0;
}

int main(int argc, char** argv) {
  const bool compile = argc == 3 && strcmp(argv[1], "--compile") == 0;
  if (argc != 2 + compile) {
    fprintf(stderr, "usage: tcpadvise-config-check [--compile] FILE\n");
    return 2;
  }
  const char* path = argv[argc - 1];
  if (compile && isatty(STDOUT_FILENO)) {
    fprintf(stderr, "tcpadvise-config-check: --compile writes binary data: redirect stdout to a file\n");
    return 2;
  }
  static tcpadvise::PolicyConfig config;
  static char errors[65536];
  const int count = tcpadvise_load_config(path, &config, errors, sizeof(errors));
  if (count > 0) {
    for (char* line = strtok(errors, "\n"); line != nullptr; line = strtok(nullptr, "\n")) {
      fprintf(compile ? stderr : stdout, "%s:%s\n", path, line);
    }
    return 2;
  }
  if (compile) {
    if (WriteCompiled(config)) return 0;
    fprintf(stderr, "tcpadvise-config-check: cannot write the compiled config\n");
    return 2;
  }
  const tcpadvise::ExperimentConfig& e = config.experiment;
  const int rules = config.rule_count - e.arm_count;
  printf("%s: %d rule%s%s\n", path, rules, rules == 1 ? "" : "s", e.enabled ? ", 1 experiment" : "");
  char policy[128];
  for (int i = 0; i < rules; ++i) {
    Describe(config.rules[i].settings, policy, sizeof(policy));
    printf("  %d. %s:%s\n", i + 1, config.rules[i].name, policy);
  }
  if (e.enabled) {
    printf("  experiment %s (seed %llu), arms (the first is the control):\n", e.name,
           static_cast<unsigned long long>(e.seed));
    for (int i = 0; i < e.arm_count; ++i) {
      Describe(config.rules[e.arms[i].rule].settings, policy, sizeof(policy));
      printf("    %s, weight %g:%s\n", e.arms[i].name, e.arms[i].weight, policy);
    }
  }
  return 0;
}
