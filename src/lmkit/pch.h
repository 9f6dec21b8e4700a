// Precompiled header: the LibTorch headers every translation unit of the
// library and the tests pulls in anyway. Not included by any source file.
#pragma once
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/functional.h>
#include <torch/nn/pimpl.h>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
