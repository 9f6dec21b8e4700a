// The headers the projects of examples/ share, compiled once for all of them
// (tests/install/examples/CMakeLists.txt). Not included by any source file.
#pragma once
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/functional.h>
#include "lmkit/core/error.h"
#include "lmkit/core/plugin.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/models/family.h"
#include "lmkit/models/model.h"
