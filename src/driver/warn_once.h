// warn_once lives in ir/warn_once.h, below every library (the cubin cache in runtime
// warns through it too); this header keeps the driver's and the tuner's includes.
#pragma once
#include "ir/warn_once.h"
