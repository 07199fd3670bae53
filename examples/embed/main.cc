// Embedding Kiln: load a program, print its contract, create a Method on an arena the app
// owns, then bind, fill, execute and read it at two shapes in turn.
//   kiln_embed PROGRAM.kiln [SHAPE ...]   e.g.  kiln_embed cnn.kiln 4x3x64x64 1x3x17x17
// Each SHAPE is one input's shape ("2x3x32x32"; several inputs: one argument each, separated
// by ","). Without SHAPEs it runs at the bound and at each dim's minimum.
#include <kiln/method.h>
#include <kiln/program.h>
#include <kiln/version.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

// Every call that can fail returns a Status (or a Result holding one): print it and stop.
bool failed(const kiln::Status& s, const char* what) {
  if (s.ok()) return false;
  std::fprintf(stderr, "%s failed (%s): %s\n", what, kiln::code_name(s.code()), s.message().c_str());
  return true;
}

using Shapes = std::vector<std::vector<int64_t>>;

// "4x3x64x64,1x8" -> {{4, 3, 64, 64}, {1, 8}}
bool parse_shapes(const std::string& text, Shapes* out) {
  std::stringstream inputs(text);
  for (std::string one; std::getline(inputs, one, ',');) {
    std::vector<int64_t> dims;
    std::stringstream axes(one);
    for (std::string d; std::getline(axes, d, 'x');) {
      char* end = nullptr;
      const long long v = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end != '\0' || v < 0) return false;
      dims.push_back(v);
    }
    out->push_back(dims);
  }
  return !out->empty();
}

// Each dim at its smallest admissible value (its minimum, rounded up to its step).
Shapes smallest_shapes(const kiln::MethodMeta& meta) {
  Shapes shapes;
  for (const kiln::TensorSpec& t : meta.inputs) {
    std::vector<int64_t> s;
    for (const kiln::AxisSpec& a : t.axes) {
      if (a.dim < 0) { s.push_back(a.size); continue; }
      const kiln::DimSpec& d = meta.dims[static_cast<size_t>(a.dim)];
      s.push_back((d.min + d.step - 1) / d.step * d.step);
    }
    shapes.push_back(s);
  }
  return shapes;
}

void print_contract(const kiln::MethodMeta& meta) {
  std::printf("method '%s'\n", meta.name.c_str());
  for (const kiln::DimSpec& d : meta.dims)
    std::printf("  dim %s in [%lld, %lld] step %lld\n", d.name.c_str(), static_cast<long long>(d.min),
                static_cast<long long>(d.max), static_cast<long long>(d.step));
  for (const kiln::TensorSpec& t : meta.inputs)
    std::printf("  input  '%s' %s %s\n", t.name.c_str(), kiln::dtype_name(t.dtype), t.shape_text().c_str());
  for (const kiln::TensorSpec& t : meta.outputs)
    std::printf("  output '%s' %s %s\n", t.name.c_str(), kiln::dtype_name(t.dtype), t.shape_text().c_str());
  for (const kiln::GuardSpec& g : meta.guards) std::printf("  guard  %s\n", g.text.c_str());
  std::printf("  arena %llu bytes at the bound\n", static_cast<unsigned long long>(meta.arena_bytes));
}

std::string shape_string(const kiln::TensorView& t) {
  std::string s;
  for (int k = 0; k < t.rank; ++k) s += (k ? "x" : "") + std::to_string(t.dims[k]);
  return s.empty() ? "scalar" : s;
}

// Binds `shapes`, writes every input, executes and prints every output. False on an error.
bool run_at(kiln::Method& method, const Shapes& shapes) {
  if (failed(method.bind_shapes(shapes), "bind")) return false;
  const kiln::MethodMeta& meta = method.meta();
  for (const kiln::TensorSpec& spec : meta.inputs) {
    // An app knows its inputs by name; the index is where that name sits in this program.
    kiln::Result<size_t> index = method.input_index(spec.name);
    if (failed(index.status(), "input_index")) return false;
    const kiln::TensorView& view = method.input(*index);  // the bound shape; read-only
    const int64_t n = view.numel();
    if (float* x = method.input_data<float>(*index)) {
      for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 17) / 17.f - 0.5f;
    } else if (int64_t* x = method.input_data<int64_t>(*index)) {
      for (int64_t i = 0; i < n; ++i) x[i] = i % 2;
    } else if (int32_t* x = method.input_data<int32_t>(*index)) {
      for (int64_t i = 0; i < n; ++i) x[i] = static_cast<int32_t>(i % 2);
    } else if (bool* x = method.input_data<bool>(*index)) {
      for (int64_t i = 0; i < n; ++i) x[i] = i % 2 == 0;
    }
    std::printf("  input  '%s' %s\n", spec.name.c_str(), shape_string(view).c_str());
  }
  if (failed(method.execute(), "execute")) return false;
  for (size_t o = 0; o < method.num_outputs(); ++o) {
    const kiln::TensorView& y = method.output(o);  // valid until the next bind or execute
    std::printf("  output '%s' %s", meta.outputs[o].name.c_str(), shape_string(y).c_str());
    if (y.dtype == kiln::DType::kF32) {
      double sum = 0;
      for (int64_t i = 0; i < y.numel(); ++i) sum += y.as<float>()[i];
      std::printf(" sum %.6g", sum);
    }
    std::printf("\n");
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PROGRAM.kiln [SHAPE ...]\n", argv[0]);
    return 2;
  }
  std::printf("kiln %s (headers %s), format %u\n", kiln::version(), KILN_VERSION_STRING, kiln::format_version());

  kiln::Result<std::unique_ptr<kiln::Program>> program = kiln::Program::load(argv[1]);
  if (failed(program.status(), "load")) return 1;
  if ((*program)->num_methods() == 0) return 1;
  const std::string name = (*program)->method_name(0);
  kiln::Result<kiln::MethodMeta> meta = (*program)->method_meta(name);
  if (failed(meta.status(), "method_meta")) return 1;
  print_contract(*meta);

  // The app owns the memory: one arena, 16-byte aligned, sized by the program for these options.
  kiln::MethodOptions options;
  options.cpu_threads = 1;
  kiln::Result<uint64_t> arena_bytes = kiln::Method::arena_bytes(**program, name, options);
  if (failed(arena_bytes.status(), "arena_bytes")) return 1;
  const size_t size = (static_cast<size_t>(*arena_bytes) + 63) / 64 * 64;
  std::unique_ptr<void, decltype(&std::free)> arena(std::aligned_alloc(64, size ? size : 64), &std::free);
  if (!arena) return 1;
  kiln::Result<std::unique_ptr<kiln::Method>> method =
      kiln::Method::create(**program, name, options, arena.get(), size);
  if (failed(method.status(), "create")) return 1;
  if (!(*method)->delegate_warning().empty()) std::printf("note: %s\n", (*method)->delegate_warning().c_str());

  std::vector<Shapes> runs;
  for (int a = 2; a < argc; ++a) {
    Shapes s;
    if (!parse_shapes(argv[a], &s)) {
      std::fprintf(stderr, "bad shape '%s': write it as 1x3x224x224 (inputs separated by ',')\n", argv[a]);
      return 2;
    }
    runs.push_back(s);
  }
  if (runs.empty()) runs = {(*method)->bound_shapes(), smallest_shapes(*meta)};
  for (const Shapes& shapes : runs) {
    std::printf("run:\n");
    if (!run_at(**method, shapes)) return 1;
  }
  return 0;
}
