#pragma once
// Owning attribute list used by the graph builder and tests; view() lends it as Attrs.

#include <string>
#include <vector>

#include "core/attrs.h"

namespace kiln::core {

class AttrStore {
 public:
  AttrStore& set_int(const std::string& name, int64_t v) { return put(name, AttrKind::kInt).set_i(v); }
  AttrStore& set_float(const std::string& name, float v) { return put(name, AttrKind::kFloat).set_f(v); }
  AttrStore& set_ints(const std::string& name, std::vector<int64_t> v) {
    Owned& o = slot(name, AttrKind::kInts);
    o.ints = std::move(v);
    return *this;
  }
  AttrStore& set_floats(const std::string& name, std::vector<float> v) {
    Owned& o = slot(name, AttrKind::kFloats);
    o.floats = std::move(v);
    return *this;
  }
  AttrStore& set_str(const std::string& name, std::string v) {
    Owned& o = slot(name, AttrKind::kString);
    o.s = std::move(v);
    return *this;
  }

  /// Borrowed view, valid until this store is modified, moved or destroyed.
  Attrs view() const {
    refs_.clear();
    for (const Owned& o : items_) {
      AttrRef r;
      r.name = o.name.c_str();
      r.kind = o.kind;
      r.i = o.i;
      r.f = o.f;
      if (o.kind == AttrKind::kInts) {
        r.ints = o.ints.data();
        r.count = static_cast<uint32_t>(o.ints.size());
      } else if (o.kind == AttrKind::kFloats) {
        r.floats = o.floats.data();
        r.count = static_cast<uint32_t>(o.floats.size());
      } else if (o.kind == AttrKind::kString) {
        r.str = o.s.c_str();
        r.count = static_cast<uint32_t>(o.s.size());
      }
      refs_.push_back(r);
    }
    return Attrs(refs_.data(), static_cast<uint32_t>(refs_.size()));
  }

  struct Owned {
    std::string name;
    AttrKind kind = AttrKind::kInt;
    int64_t i = 0;
    float f = 0.f;
    std::vector<int64_t> ints;
    std::vector<float> floats;
    std::string s;
  };
  const std::vector<Owned>& items() const { return items_; }

 private:
  struct Setter {
    AttrStore* self;
    Owned* o;
    AttrStore& set_i(int64_t v) { o->i = v; return *self; }
    AttrStore& set_f(float v) { o->f = v; return *self; }
  };
  Owned& slot(const std::string& name, AttrKind kind) {
    for (Owned& o : items_) {
      if (o.name == name) {
        o = Owned{};
        o.name = name;
        o.kind = kind;
        return o;
      }
    }
    items_.push_back(Owned{});
    items_.back().name = name;
    items_.back().kind = kind;
    return items_.back();
  }
  Setter put(const std::string& name, AttrKind kind) { return Setter{this, &slot(name, kind)}; }

  std::vector<Owned> items_;
  mutable std::vector<AttrRef> refs_;
};

}  // namespace kiln::core
