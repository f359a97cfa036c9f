// Where a training step's time goes (`--profile`): wall time per op kind, forward and backward,
// plus named phases outside the tape (the optimizer, clipping). Off by default; when off, each
// op pays one branch.
// Forward: an op records itself right after computing its output, so the wall time since the
// previous record (or since profile_mark(), at the start of a step) is charged to it. Work done
// between ops without recording (views, argument checks) lands on the next op.
// Backward: each tape node's backward closure is timed on its own.
// FLOPs: what the FLOP counter (runtime.hpp: sgemm's 2 m n k, the attention kernel's own count)
// advanced in the same windows, so an op's GFLOP/s, and its share of the sgemm peak, show
// whether its GEMMs are what bounds it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tri {

struct OpTime {
  std::string op;  // the op's tape name ("linear", "attention", ...) or a phase ("adamw")
  int64_t calls = 0;
  double forward_ms = 0, backward_ms = 0;
  int64_t flops = 0;  // counted in its forward and backward windows
};

void profile_enable(bool on);
bool profiling();
// Clears the table and restarts the forward clock.
void profile_reset();
// Restarts the forward clock: nothing before this is charged to the next op.
void profile_mark();
// Charges the time since the last mark or record to `op`'s forward (autograd's record()).
void profile_forward(const char* op);
// Adds a measured duration, and the FLOPs counted in it, to `op`'s backward column (autograd's
// backward()); or, for a phase outside the tape, a duration to its forward column.
void profile_backward(const char* op, double ms, int64_t flops);
void profile_phase(const char* name, double ms);

// The table, costliest first.
std::vector<OpTime> profile_table();
// The table as text, per step: op, calls, forward and backward ms, share of the total, GFLOP/s
// of the ops that count FLOPs and, given the sgemm peak (GFLOP/s), their share of it.
std::string profile_report(int64_t steps, double peak_gflops = 0);

// Times a scope into profile_phase(name) when profiling.
class ProfilePhase {
 public:
  explicit ProfilePhase(const char* name);
  ~ProfilePhase();
  ProfilePhase(const ProfilePhase&) = delete;
  ProfilePhase& operator=(const ProfilePhase&) = delete;

 private:
  const char* name_;
  int64_t start_ns_;
};

}  // namespace tri
