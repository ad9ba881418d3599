// Private: the model description the front ends (Runner, Submitter) report.
#pragma once

#include "furiosa/runtime/runner.h"

namespace furiosa::runtime::detail {

/// `model` (the session's description, formats named by rank) with the axis naming the compiler
/// recorded for a model input or output (HostSlot::format, e.g. "NHWC" for TFLite images) in
/// place of the rank-based default. Inputs and outputs are in the compiled model's slot order.
inline Model with_recorded_formats(Model model, const compiler::CompiledModel& compiled) {
  for (std::size_t i = 0; i < model.inputs.size() && i < compiled.input_slots.size(); ++i) {
    const auto& slot = compiled.slots[static_cast<std::size_t>(compiled.input_slots[i])];
    if (!slot.format.empty()) model.inputs[i].format = slot.format;
  }
  for (std::size_t i = 0; i < model.outputs.size() && i < compiled.output_slots.size(); ++i) {
    const auto& slot = compiled.slots[static_cast<std::size_t>(compiled.output_slots[i])];
    if (!slot.format.empty()) model.outputs[i].format = slot.format;
  }
  return model;
}

}  // namespace furiosa::runtime::detail
