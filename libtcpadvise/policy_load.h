// PolicyLoad: reading the policy config (LoadPolicyConfig, declared in
// policy.h) through libtcpadvise_config.so, which the shim dlopens from its
// own directory only when TCPADVISE_CONFIG is set.
#ifndef TCPADVISE_POLICY_LOAD_H_
#define TCPADVISE_POLICY_LOAD_H_

namespace tcpadvise {

// g_config_problem is set when TCPADVISE_CONFIG named a config that could
// not be used: the program is only observed, and its trace says so.
extern bool g_config_problem;

}  // namespace tcpadvise

#endif  // TCPADVISE_POLICY_LOAD_H_
