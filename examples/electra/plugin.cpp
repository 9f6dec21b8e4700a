// The plugin's entry point: registers the ELECTRA family with lmkit's registries.
#include "electra_model.h"
#include "lmkit/core/plugin.h"
#include "lmkit/models/family.h"

namespace {

void register_electra() { lmkit::models::register_family(electra::electra_family()); }

}  // namespace

LMKIT_PLUGIN(register_electra)
