// Experiment: splits the connections a config's experiment matches between
// its arms at random, by weight: each connection's arm is a keyed hash of
// the seed and its 4-tuple, so that processes and hosts draw independently
// and any draw can be recomputed from the trace; keeps one outcome record per
// connection (the unit that was randomised), closed or still open, and
// per-arm totals; and stops an arm that does worse than control beyond the
// guardrail. All of it runs on slow paths under the socket table's mutex.
#ifndef TCPADVISE_EXPERIMENT_H_
#define TCPADVISE_EXPERIMENT_H_

#include <stdint.h>
#include <sys/socket.h>

#include "config.h"
#include "socket_state.h"

namespace tcpadvise {

class JsonWriter;

// kAssignment names the draw's definition in the trace ("assignment"), so
// that a reader recomputes draws the same way (advisor/tcpadvise/ab/experiment.py).
constexpr const char* kAssignment = "splitmix64-4tuple/1";

// ArmDrawnFor is the arm the connection between local and peer draws:
// SplitMix64 chained over the seed and the two endpoints in a canonical
// order (both ends of one connection draw alike), by weight.
int ArmDrawnFor(const ExperimentConfig& experiment, const sockaddr_storage& local, const sockaddr_storage& peer);

// DrawArm is the arm a new matching connection takes: its drawn arm, or
// control (arm 0) when the guardrail stopped that arm. It may re-check the
// guardrail on live connections first (at most once a second).
int DrawArm(const ExperimentConfig& experiment, const sockaddr_storage& local, const sockaddr_storage& peer);

// ArmOfRule returns the arm whose policy is rule, or -1.
int ArmOfRule(const ExperimentConfig& experiment, int rule);

// OnExperimentConnectionClosed records the outcome of a closed connection of
// arm, and applies the guardrail to the closed connections.
void OnExperimentConnectionClosed(const ExperimentConfig& experiment, int arm, const SocketState& s,
                                  uint64_t now_ticks, double ns_per_tick);

// EmitExperiment applies the guardrail to the closed and live connections,
// then writes the trace's "experiment" object: per-arm totals and one row
// per connection, closed or live (the table's mutex is held).
void EmitExperiment(JsonWriter* w, const ExperimentConfig& experiment, double ns_per_tick);

// ResetExperimentInChild starts a fork child's experiment records afresh.
void ResetExperimentInChild();

}  // namespace tcpadvise

#endif  // TCPADVISE_EXPERIMENT_H_
