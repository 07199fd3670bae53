#pragma once
// What the reader's files share (reader.cc: the method, its values and instructions;
// reader_delegate.cc: its delegate regions): the error wording and small readers of the
// verified flatbuffer.
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "program_generated.h"

namespace kiln::format::reader_detail {

inline Status bad(const std::string& what) { return data_loss("damaged program: " + what); }

inline std::string where(const fb::Method* m, const char* kind, size_t i) {
  return "method '" + std::string(m->name()->c_str()) + "' " + kind + " #" + std::to_string(i);
}

template <typename T>
size_t len(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

// The verifier aligns vectors only to 4 bytes; 8-byte elements are read in place (the
// builder leaves empty vectors unaligned, harmlessly).
template <typename T>
bool aligned8(const flatbuffers::Vector<T>* v) {
  return !v || v->size() == 0 || reinterpret_cast<uintptr_t>(v->Data()) % 8 == 0;
}

std::vector<int32_t> value_list(const flatbuffers::Vector<int32_t>* v);

/// Per value, the value whose bytes it uses (itself unless it is an alias).
std::vector<int32_t> roots(const fb::Method* m);

/// An arena plan's placement order (MemoryPlan below/order) over `slots`, the values it places.
Status check_placement(const fb::Method* m, const fb::MemoryPlan* plan, const std::vector<int32_t>& slots,
                       const std::string& name);

/// The method's delegate: its channels-last values, regions and ops, and its arena plan.
Status check_delegate(const fb::Method* m);

}  // namespace kiln::format::reader_detail
