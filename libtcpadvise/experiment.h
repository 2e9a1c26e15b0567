// Experiment: splits the connections a config's experiment matches between
// its arms at random, by weight and reproducibly from the seed; keeps one
// outcome record per connection (the unit that was randomised) and per-arm
// totals; and stops an arm that does worse than control beyond the
// guardrail. All of it runs on slow paths under the socket table's mutex.
#ifndef TCPADVISE_EXPERIMENT_H_
#define TCPADVISE_EXPERIMENT_H_

#include <stdint.h>

#include "config.h"
#include "socket_state.h"

namespace tcpadvise {

class JsonWriter;

// DrawArm picks the arm of the next matching connection; an arm the
// guardrail stopped hands its connections to control (arm 0).
int DrawArm(const ExperimentConfig& experiment);

// ArmOfRule returns the arm whose policy is rule, or -1.
int ArmOfRule(const ExperimentConfig& experiment, int rule);

// OnExperimentConnectionClosed records the outcome of a closed connection of
// arm, and applies the guardrail.
void OnExperimentConnectionClosed(const ExperimentConfig& experiment, int arm, const SocketState& s,
                                  uint64_t now_ticks, double ns_per_tick);

// EmitExperiment writes the trace's "experiment" object.
void EmitExperiment(JsonWriter* w, const ExperimentConfig& experiment, double ns_per_tick);

// ResetExperimentInChild starts a fork child's experiment records afresh;
// its draws go on from the parent's sequence.
void ResetExperimentInChild();

}  // namespace tcpadvise

#endif  // TCPADVISE_EXPERIMENT_H_
