// The plugin's entry point: registers the electra objective and the ELECTRA family.
#include "electra_model.h"
#include "lmkit/core/plugin.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/models/family.h"

namespace {

void register_electra() {
  // The data are lmkit's masked-LM batches: the generator's labels; the model does the rest.
  lmkit::data::ObjectiveSpec spec = lmkit::data::objective("mlm");
  spec.name = "electra";
  spec.summary = "replaced token detection (ELECTRA): a small MLM generator fills the masked positions, the "
                 "discriminator labels every token replaced or original";
  lmkit::data::register_objective(spec);
  lmkit::models::register_family(electra::electra_family());
}

}  // namespace

LMKIT_PLUGIN(register_electra)
