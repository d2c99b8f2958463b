// `psctl data synth-ctr`: writes a synthetic click-through-rate data set in
// the Criteo text format from a planted logistic model (data/synth_ctr.h)
// and prints the best AUC any model can reach on its held-out set.
#ifndef PSFLOW_CLIENT_PSCTL_DATA_COMMAND_H_
#define PSFLOW_CLIENT_PSCTL_DATA_COMMAND_H_

#include <memory>

#include "client/psctl/subcommand.h"

namespace psflow {

std::unique_ptr<Subcommand> NewDataSynthCtrCommand();

}  // namespace psflow

#endif  // PSFLOW_CLIENT_PSCTL_DATA_COMMAND_H_
