// Attribute accessors of OpNode.
#include "furiosa/host/op_node.h"

#include <fmt/format.h>

#include "furiosa/core/error.h"

namespace furiosa::host {

namespace {

// Fetches attribute `key` as T, or nullptr when absent; throws when present with another kind.
template <class T>
const T* typed_attr(const OpNode& node, const std::string& key) {
  auto it = node.attributes.find(key);
  if (it == node.attributes.end()) return nullptr;
  const T* v = std::get_if<T>(&it->second);
  if (!v) {
    throw Error(ErrorCode::IncompatibleModel,
                fmt::format("node '{}' ({}): attribute '{}' has an unexpected type", node.name,
                            node.op_type, key));
  }
  return v;
}

}  // namespace

std::int64_t OpNode::attr_int(const std::string& key, std::int64_t fallback) const {
  const auto* v = typed_attr<std::int64_t>(*this, key);
  return v ? *v : fallback;
}

std::vector<std::int64_t> OpNode::attr_ints(const std::string& key,
                                          std::vector<std::int64_t> fallback) const {
  const auto* v = typed_attr<std::vector<std::int64_t>>(*this, key);
  return v ? *v : fallback;
}

std::string OpNode::attr_string(const std::string& key, std::string fallback) const {
  const auto* v = typed_attr<std::string>(*this, key);
  return v ? *v : fallback;
}

std::string OpNode::qualified_op() const {
  return domain.empty() ? op_type : domain + "::" + op_type;
}

}  // namespace furiosa::host
