// lmkit's own optimizers, one file each (adamw.cpp, adafactor.cpp, lamb.cpp, muon.cpp); the
// registry (optimizer.cpp) lists them before those programs and plugins register.
#pragma once

#include "lmkit/train/optimizer.h"

namespace lmkit::train {

OptimizerSpec adamw_optimizer();
OptimizerSpec adafactor_optimizer();
OptimizerSpec lamb_optimizer();
OptimizerSpec muon_optimizer();

}  // namespace lmkit::train
