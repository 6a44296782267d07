// The child side of MeasureWorker: `loom tune-worker --device N` (a hidden command; the
// tuner starts it, people do not). Reads jobs on stdin and answers on stdout in the
// protocol of worker_protocol.h until end of file; exits after a CUDA fault, whose
// poisoned context would spoil every later measurement.
#pragma once

namespace loom::tune {

// argv: the arguments after `tune-worker`. Returns the process exit status.
int tune_worker_main(int argc, char** argv);

}  // namespace loom::tune
