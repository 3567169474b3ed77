// The DRA room of an extended resource: see dra_extended.hpp.
#include "gpuctl/ops/dra/dra_extended.hpp"

#include <algorithm>

#include "gpuctl/ops/dra/dra_cel.hpp"

namespace gpuctl::ops {

std::map<std::string, DraExtendedRoom> dra_extended_room(const DraInventory& inventory, std::string_view resource) {
  std::map<std::string, DraExtendedRoom> room;
  auto cls = std::find_if(inventory.classes.begin(), inventory.classes.end(),
                          [&](const DraDeviceClass& c) { return c.extended_resource_name == resource; });
  if (resource.empty() || cls == inventory.classes.end()) return room;
  for (const auto& d : inventory.devices) {
    if (d.node.empty() || d.unhealthy()) continue;
    if (evaluate_device_selectors(cls->selectors, d).kind == CelVerdict::Kind::no_match) continue;
    auto& r = room[d.node];
    ++r.devices;
    if (inventory.holder({d.driver, d.pool, d.name}) != nullptr) ++r.held;
  }
  return room;
}

}  // namespace gpuctl::ops
