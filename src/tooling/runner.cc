#include "tooling/runner.h"

#include "image/image.h"

#include "tooling/file_io.h"

#include <nlohmann/json.hpp>

#include <map>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "kiln/bucketed.h"
#include "kiln/method.h"
#include "kiln/program.h"
#include "tooling/npy.h"
#include "core/bytes.h"
#include "core/status.h"

namespace kiln::tooling {

Result<std::vector<std::vector<int64_t>>> parse_shapes(const std::string& text, size_t num_inputs) {
  const std::string how =
      "write sizes joined by 'x' and shapes separated by ',' (1x3x224x224,1x4), or sizes joined by ',' and shapes "
      "separated by ';' or in brackets (1,3,224,224;1,4 or [1,3,224,224],[1,4]); a scalar is 'scalar' or []";
  // Shapes as token lists: [..] groups, or ';'-separated, or ','-separated 'x' shapes.
  std::vector<std::string> groups;
  char dim_sep = 'x';
  const bool bracketed = text.find('[') != std::string::npos;
  if (bracketed) {
    dim_sep = ',';
    size_t at = 0;
    while (at < text.size()) {
      const size_t open = text.find('[', at), close = text.find(']', at);
      if (open != at || close == std::string::npos) return invalid_argument("cannot parse shapes '" + text + "': " + how);
      groups.push_back(text.substr(open + 1, close - open - 1));
      at = close + 1;
      if (at < text.size() && text[at] == ',') ++at;
      if (at == text.size() && text.back() == ',') return invalid_argument("cannot parse shapes '" + text + "': " + how);
    }
  } else {
    const bool semis = text.find(';') != std::string::npos;
    // Only digits and commas: one shape of several sizes when the method takes one input and
    // the count of sizes is not the count of inputs; otherwise a rank-1 shape per input.
    const bool commas_are_dims = semis || (text.find('x') == std::string::npos && num_inputs == 1 &&
                                           text.find(',') != std::string::npos && text.find("scalar") == std::string::npos);
    dim_sep = commas_are_dims ? ',' : 'x';
    const char shape_sep = semis ? ';' : commas_are_dims ? '\0' : ',';
    if (text.empty() || text.back() == shape_sep || text.back() == dim_sep)
      return invalid_argument("cannot parse shapes '" + text + "': " + how);
    if (shape_sep == '\0') {
      groups.push_back(text);
    } else {
      std::stringstream ss(text);
      std::string tok;
      while (std::getline(ss, tok, shape_sep)) groups.push_back(tok);
    }
  }
  std::vector<std::vector<int64_t>> shapes;
  for (const std::string& tok : groups) {
    std::vector<int64_t> shape;
    if (bracketed && tok.empty()) {  // "[]": a scalar
      shapes.push_back(shape);
      continue;
    }
    if (tok.empty() || tok.back() == dim_sep)
      return invalid_argument("cannot parse shape '" + tok + "' in '" + text + "': " + how);
    if (tok != "scalar") {
      std::stringstream ds(tok);
      std::string d;
      while (std::getline(ds, d, dim_sep)) {
        if (d.empty() || d.size() > 15 || d.find_first_not_of("0123456789") != std::string::npos)
          return invalid_argument("cannot parse shape '" + tok + "' in '" + text + "': " + how);
        shape.push_back(std::stoll(d));
      }
    }
    shapes.push_back(std::move(shape));
  }
  if (shapes.empty()) return invalid_argument("no shapes in '" + text + "'");
  return shapes;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (size_t k = 0; k < shape.size(); ++k) s += (k ? "x" : "") + std::to_string(shape[k]);
  return s;
}

namespace {

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

/// One input as the host gives it, before a shape is chosen: ones, a raw file (read at bind,
/// only where the requested shape lies), or an array with its own shape (.npy, --image).
struct HostInput {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  ///< .npy / image: its own shape (has_own_shape)
  std::vector<uint8_t> bytes;  ///< .npy / image: the data at `shape`
  bool has_own_shape = false;
  enum class Origin { kOnes, kFile, kImage } origin = Origin::kOnes;
  std::string source;           ///< the file, or the image's description
  /// What the runner prints for it: "ones", the file, or the image's description.
  std::string label() const { return origin == Origin::kOnes ? "ones" : source; }
  bool raw = false;             ///< a raw .bin file, `source`
  uint64_t file_bytes = 0;      ///< its size
};

// n zero bytes, or a one-line error naming what they were for and their size (never bad_alloc).
Status allocate(std::vector<uint8_t>* v, uint64_t n, const std::string& what) {
  try {
    if (n > v->max_size()) throw std::bad_alloc();
    v->assign(static_cast<size_t>(n), 0);
  } catch (const std::exception&) {
    return resource_exhausted("cannot allocate " + what + ": " + core::human_bytes(n) + " (" + std::to_string(n) + " bytes)");
  }
  return ok_status();
}

// `n` elements of `dtype` set to one.
void fill_ones(DType dtype, void* data, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    switch (dtype) {
      case DType::kF32: static_cast<float*>(data)[k] = 1.f; break;
      case DType::kI64: static_cast<int64_t*>(data)[k] = 1; break;
      case DType::kI32: static_cast<int32_t*>(data)[k] = 1; break;
      case DType::kBool:
      case DType::kI8:
      case DType::kU8: static_cast<uint8_t*>(data)[k] = 1; break;
    }
  }
}

// The block [0, shape) of a raw file laid out at `bound` (C order), into dst (C order at
// `shape`): one read per contiguous run, the surplus never read.
Status read_bound_layout(const FileReader& f, const std::vector<int64_t>& bound, const std::vector<int64_t>& shape,
                         size_t elem, uint8_t* dst) {
  const size_t rank = shape.size();
  if (numel(shape) == 0) return ok_status();
  // Axes j..rank-1 form one run when every axis after j has its bound size.
  size_t j = rank;
  uint64_t run = elem;
  while (j > 0) {
    --j;
    run *= static_cast<uint64_t>(shape[j]);
    if (shape[j] != bound[j]) break;
  }
  if (rank == 0 || (j == 0 && shape[0] == bound[0])) return f.read_at(0, dst, static_cast<size_t>(run));
  std::vector<uint64_t> stride(rank, elem);  // the file's strides, in bytes
  for (size_t k = rank - 1; k-- > 0;) stride[k] = stride[k + 1] * static_cast<uint64_t>(bound[k + 1]);
  std::vector<int64_t> idx(j, 0);  // over axes 0..j-1
  for (uint64_t out = 0;; out += run) {
    uint64_t at = 0;
    for (size_t k = 0; k < j; ++k) at += static_cast<uint64_t>(idx[k]) * stride[k];
    KILN_TRY(f.read_at(at, dst + out, static_cast<size_t>(run)));
    size_t k = j;
    while (k > 0 && ++idx[k - 1] == shape[k - 1]) idx[--k] = 0;
    if (k == 0) break;
  }
  return ok_status();
}

struct Request {
  std::string input_shapes;
  std::vector<std::string> inputs;
  std::string output_file;
  std::string print_output;
};

// "Summary of 20 executions: first 3.1 ms; then min 2.0, median 2.1, mean 2.2, p90 2.4 ms"
std::string timing_summary(const std::vector<double>& times) {
  std::vector<double> rest(times.begin() + 1, times.end());
  std::sort(rest.begin(), rest.end());
  double sum = 0;
  for (double t : rest) sum += t;
  const auto at = [&](double q) { return rest[std::min(rest.size() - 1, static_cast<size_t>(q * static_cast<double>(rest.size())))]; };
  std::ostringstream o;
  o << std::fixed << std::setprecision(6) << "Summary of " << times.size() << " executions: first " << times[0]
    << " ms; the other " << rest.size() << ": min " << rest.front() << ", median " << at(0.5) << ", mean "
    << sum / static_cast<double>(rest.size()) << ", p90 " << at(0.9) << " ms\n";
  return o.str();
}

// Per step, sorted by time, then by op type (delegated and portable apart).
std::string profile_text(const std::vector<ProfileRow>& rows, bool delegated) {
  uint64_t total = 0, runs = 1;
  for (const ProfileRow& r : rows) total += r.ns, runs = std::max<uint64_t>(1, r.runs);
  std::vector<const ProfileRow*> order;
  for (const ProfileRow& r : rows) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [](const ProfileRow* a, const ProfileRow* b) { return a->ns > b->ns; });
  auto ms = [&](uint64_t ns) { return static_cast<double>(ns) / 1e6 / static_cast<double>(runs); };
  auto share = [&](uint64_t ns) { return total ? 100.0 * static_cast<double>(ns) / static_cast<double>(total) : 0.0; };
  std::ostringstream o;
  o << std::fixed << std::setprecision(3);
  o << "Profile over " << runs << " execution(s)" << (delegated ? "" : " (portable kernels only)") << ": " << ms(total)
    << " ms per execution in " << rows.size() << " steps\n";
  o << "      ms   share  path      op                    node                              output\n";
  for (const ProfileRow* r : order) {
    o << std::setw(8) << ms(r->ns) << "  " << std::setw(5) << std::setprecision(1) << share(r->ns) << "%"
      << std::setprecision(3) << "  " << std::left << std::setw(8) << (r->delegated ? "xnnpack" : "portable") << "  "
      << std::setw(20) << r->op << "  " << std::setw(32) << r->node << "  " << r->shape
      << (r->in_next ? " (computed in the next step)" : "") << std::right << "\n";
  }
  std::map<std::pair<std::string, bool>, std::pair<uint64_t, int>> by_op;
  for (const ProfileRow& r : rows) {
    auto& e = by_op[{r.op, r.delegated}];
    e.first += r.ns;
    ++e.second;
  }
  std::vector<std::pair<std::pair<std::string, bool>, std::pair<uint64_t, int>>> ops(by_op.begin(), by_op.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  o << "By op type:\n";
  for (const auto& [key, v] : ops)
    o << std::setw(8) << ms(v.first) << "  " << std::setw(5) << std::setprecision(1) << share(v.first) << "%"
      << std::setprecision(3) << "  " << std::left << std::setw(8) << (key.second ? "xnnpack" : "portable") << "  "
      << key.first << " x" << v.second << std::right << "\n";
  return o.str();
}

// What the thread pool did per execution: with more than one thread, how much of the work the
// workers took and how long the caller waited for them (on a shared CPU, for a preempted one).
std::string thread_text(const ThreadProfile& t) {
  if (t.runs == 0) return "";
  const double runs = static_cast<double>(t.runs);
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << "Threads: " << t.threads << "; the caller was on a core "
    << (t.wall_ns ? 100.0 * static_cast<double>(t.caller_cpu_ns) / static_cast<double>(t.wall_ns) : 0.0)
    << "% of the wall time (the rest: waiting for workers, or the OS running other work on its core)";
  if (t.threads > 1) {
    o << std::setprecision(3) << "; per execution " << t.jobs / runs << " parallel jobs, " << std::setprecision(1)
      << (t.items ? 100.0 * static_cast<double>(t.worker_items) / static_cast<double>(t.items) : 0.0)
      << "% of their items on the workers; the caller waited " << std::setprecision(3)
      << static_cast<double>(t.wait_ns) / 1e6 / runs << " ms for workers' chunks (" << std::setprecision(2)
      << static_cast<double>(t.long_waits) / runs << " waits over 0.2 ms: a worker preempted holding a chunk); "
      << static_cast<double>(t.alone_jobs) / runs << " jobs on the caller alone (the workers found no free core); "
      << t.moves << " workers moved off the caller's core";
  }
  o << "\n";
  return o.str();
}

nlohmann::json profile_json(const std::vector<ProfileRow>& rows) {
  nlohmann::json j = nlohmann::json::array();
  for (const ProfileRow& r : rows)
    j.push_back({{"op", r.op}, {"node", r.node}, {"path", r.delegated ? "xnnpack" : "portable"}, {"shape", r.shape},
                 {"ms_per_run", r.runs ? static_cast<double>(r.ns) / 1e6 / static_cast<double>(r.runs) : 0.0},
                 {"runs", r.runs}, {"in_next", r.in_next}});
  return j;
}

class Runner {
 public:
  Runner(const RunnerOptions& o, std::ostream& out) : opts_(o), out_(out) {}

  /// The method whose metadata describes the inputs and outputs: the one that runs, or the
  /// largest bucket of a bucketed method.
  const Method& method() const { return *meta_method_; }

  Status init() {
    KILN_ASSIGN_OR_RETURN(program_, Program::load(opts_.model_path));
    MethodOptions mo;
    mo.use_delegate = opts_.delegate != "none";
    mo.check_finite_inputs = opts_.check_finite_inputs;
    mo.cpu_threads = opts_.cpu_threads;
    if (!opts_.max_shapes.empty()) {
      KILN_ASSIGN_OR_RETURN(MethodMeta meta, program_->method_meta(opts_.method_name));
      KILN_ASSIGN_OR_RETURN(mo.max_shapes, parse_shapes(opts_.max_shapes, meta.inputs.size()));
      max_shapes_ = mo.max_shapes;
    }
    if (!program_->method_meta(opts_.method_name).ok() && BucketedMethod::has_buckets(*program_, opts_.method_name)) {
      if (opts_.profile || !opts_.max_shapes.empty() || opts_.server_mode)
        return invalid_argument("method '" + opts_.method_name + "' is bucketed: --profile, --max_shapes and --server_mode "
                                "take one bucket (--method_name=" + opts_.method_name + "@...)");
      KILN_ASSIGN_OR_RETURN(bucketed_, BucketedMethod::create(*program_, opts_.method_name, mo));
      meta_method_ = bucketed_->bucket(bucketed_->sizes().size() - 1);
    } else {
      KILN_ASSIGN_OR_RETURN(method_, Method::create(*program_, opts_.method_name, mo));
      meta_method_ = method_.get();
    }
    if (!opts_.max_shapes.empty())
      out_ << "Arena: " << core::human_bytes(method_->planned_arena_bytes()) << " (" << method_->planned_arena_bytes()
           << " bytes) for --max_shapes=" << opts_.max_shapes << "\n";
    KILN_TRY(prepare_inputs(opts_.inputs, &host_));
    if (!opts_.image.empty()) KILN_TRY(prepare_image(&host_[0]));
    return ok_status();
  }

  /// Input 0 from --image: decoded, fitted by --preprocess to the input's height and width
  /// (at --input_shapes, else its static sizes, --max_shapes or the bound), normalized, in the
  /// input's layout.
  Status prepare_image(HostInput* h) {
    const MethodMeta& meta = meta_method_->meta();
    if (meta.inputs.empty() || meta.inputs[0].dtype != DType::kF32 || meta.inputs[0].axes.size() != 4)
      return invalid_argument("--image feeds input 0, which must be f32 of rank 4 (NCHW or NHWC); method '" + meta.name +
                              "' takes " + (meta.inputs.empty() ? std::string("no inputs") : meta.inputs[0].shape_text()));
    std::vector<int64_t> shape = default_shapes()[0];
    if (!opts_.input_shapes.empty()) {
      KILN_ASSIGN_OR_RETURN(auto shapes, parse_shapes(opts_.input_shapes, meta.inputs.size()));
      if (!shapes.empty() && shapes[0].size() == 4) shape = shapes[0];
    }
    const auto is_channels = [](int64_t c) { return c == 1 || c == 3 || c == 4; };
    const bool nchw = is_channels(shape[1]) || !is_channels(shape[3]);
    const int64_t c = nchw ? shape[1] : shape[3], height = nchw ? shape[2] : shape[1], width = nchw ? shape[3] : shape[2];
    if (!is_channels(c) || shape[0] != 1 || height < 1 || width < 1 || height > 65536 || width > 65536) {
      std::string fix;
      if (opts_.input_shapes.empty() && is_channels(c) && shape[0] != 1) {  // the bound's batch: one image asks for 1
        std::vector<int64_t> one = shape;
        one[0] = 1;
        fix = " (without --input_shapes the runner takes the bound); one image is batch 1: add --input_shapes=" +
              shape_string(one) + ", or any height and width the contract admits";
      }
      return invalid_argument("--image needs input 0 as [1, C, H, W] or [1, H, W, C] with C of 1, 3 or 4; it is " +
                              shape_string(shape) + fix);
    }
    if (opts_.pad < 0 || opts_.pad > 255) return invalid_argument("--pad must be in [0, 255]");
    KILN_ASSIGN_OR_RETURN(image::Mode mode, image::parse_mode(opts_.preprocess));
    auto floats = [](const std::string& text, const char* what) -> Result<std::vector<float>> {
      std::vector<float> v;
      std::stringstream ss(text);
      for (std::string tok; std::getline(ss, tok, ',');) {
        char* end = nullptr;
        const float x = std::strtof(tok.c_str(), &end);
        if (tok.empty() || *end) return invalid_argument(std::string("cannot parse --") + what + " '" + text + "': write numbers separated by ','");
        v.push_back(x);
      }
      if (v.empty()) return invalid_argument(std::string("--") + what + " is empty");
      return v;
    };
    KILN_ASSIGN_OR_RETURN(std::vector<float> mean, floats(opts_.mean, "mean"));
    KILN_ASSIGN_OR_RETURN(std::vector<float> std, floats(opts_.std, "std"));
    KILN_ASSIGN_OR_RETURN(image::Image img, image::decode_file(opts_.image, static_cast<int>(c)));
    image::Fit f;
    const image::Image fitted = image::fit(img, static_cast<int>(width), static_cast<int>(height), mode,
                                           static_cast<uint8_t>(opts_.pad), &f);
    h->shape = shape;
    h->raw = false;
    KILN_TRY(allocate(&h->bytes, static_cast<uint64_t>(c * height * width) * sizeof(float),
                      "input 0 from image '" + opts_.image + "' at " + shape_string(shape)));
    KILN_TRY(image::to_tensor(fitted, mean, std, nchw, reinterpret_cast<float*>(h->bytes.data())));
    h->has_own_shape = true;
    std::ostringstream o;
    o << "image '" << opts_.image << "' " << img.width << "x" << img.height << ", " << opts_.preprocess << " to " << width
      << "x" << height << ": source = (pixel - (" << f.offset_x << ", " << f.offset_y << ")) / (" << f.scale_x << ", "
      << f.scale_y << ")";
    h->source = o.str();
    h->origin = HostInput::Origin::kImage;
    return ok_status();
  }

  /// The shapes an input takes when the request names none: --max_shapes, else the bound.
  std::vector<std::vector<int64_t>> default_shapes() const {
    return max_shapes_.empty() ? meta_method_->bound_shapes() : max_shapes_;
  }

  /// Each input as the host gives it: ones, a raw file (opened to learn its size; read at
  /// bind), or a .npy array with its own shape. Nothing here depends on the bound.
  Status prepare_inputs(const std::vector<std::string>& files, std::vector<HostInput>* host) const {
    const MethodMeta& meta = meta_method_->meta();
    if (files.size() > meta.inputs.size())
      return invalid_argument(std::to_string(files.size()) + " input files given but method '" + meta.name + "' takes " +
                              std::to_string(meta.inputs.size()) + " inputs");
    host->assign(meta.inputs.size(), HostInput{});
    for (size_t i = 0; i < meta.inputs.size(); ++i) {
      HostInput& h = (*host)[i];
      h.dtype = meta.inputs[i].dtype;
      std::string file = i < files.size() ? files[i] : "";
      if (file.empty()) continue;  // ones
      h.source = file;
      h.origin = HostInput::Origin::kFile;
      KILN_ASSIGN_OR_RETURN(FileReader f, FileReader::open(file));
      h.file_bytes = f.size();
      if (file.size() > 4 && file.compare(file.size() - 4, 4, ".npy") == 0) {
        Result<NpyArray> a = internal_error("");
        try {  // the file's bytes and its array: twice the file
          a = read_npy(file);
        } catch (const std::exception&) {
          return resource_exhausted("cannot allocate input '" + meta.inputs[i].name + "' (#" + std::to_string(i) +
                                    ") from '" + file + "': 2 x " + core::human_bytes(f.size()) + " (" +
                                    std::to_string(f.size()) + " bytes)");
        }
        if (!a.ok()) return a.status();
        if (a->dtype != h.dtype)
          return invalid_argument("input '" + meta.inputs[i].name + "' (#" + std::to_string(i) + "): '" + file + "' holds " +
                                  dtype_name(a->dtype) + " but the program expects " + dtype_name(h.dtype));
        h.shape = a->shape;
        h.bytes = std::move(a->data);
        h.has_own_shape = true;
      } else {
        h.raw = true;
      }
    }
    return ok_status();
  }

  /// Writes input i's data at `shape` (need bytes) to dst: ones, the .npy/image bytes, or the
  /// raw file read as exactly this shape or at the bound's layout (`bound`, surplus skipped).
  /// `how` says which.
  Status write_input(const HostInput& h, size_t i, const std::vector<int64_t>& shape, const std::vector<int64_t>& bound,
                     void* dst, std::string* how) const {
    const MethodMeta& meta = meta_method_->meta();
    const size_t elem = dtype_size(h.dtype);
    const uint64_t need = static_cast<uint64_t>(numel(shape)) * elem;
    if (!h.raw && !h.has_own_shape) {
      fill_ones(h.dtype, dst, static_cast<size_t>(need / elem));
      return ok_status();
    }
    if (h.has_own_shape) {
      if (h.bytes.size() < need) return internal_error("input #" + std::to_string(i) + " holds fewer bytes than its shape");
      if (need) std::memcpy(dst, h.bytes.data(), static_cast<size_t>(need));
      return ok_status();
    }
    const uint64_t bound_bytes = static_cast<uint64_t>(numel(bound)) * elem;
    if (h.file_bytes != need && (h.file_bytes != bound_bytes || bound.size() != shape.size()))
      return invalid_argument("input '" + meta.inputs[i].name + "' (#" + std::to_string(i) + "): '" + h.source + "' has " +
                              std::to_string(h.file_bytes) + " bytes but shape " + shape_string(shape) + " needs " +
                              std::to_string(need) + " (or the bound shape " + shape_string(bound) + " " +
                              std::to_string(bound_bytes) + "); give an exactly sized or bound-sized file");
    KILN_ASSIGN_OR_RETURN(FileReader f, FileReader::open(h.source));
    if (f.size() != h.file_bytes)
      return io_error("'" + h.source + "' changed size (" + std::to_string(h.file_bytes) + " bytes, now " +
                      std::to_string(f.size()) + "); give it again");
    if (h.file_bytes == need) return f.read_at(0, dst, static_cast<size_t>(need));
    *how = ", read at its bound layout " + shape_string(bound);
    return read_bound_layout(f, bound, shape, elem, static_cast<uint8_t*>(dst));
  }

  /// Binds the inputs at `shapes_text` (empty: each .npy's or image's own shape, else
  /// --max_shapes or the bound), then writes their data at those shapes: into the method's
  /// arena, or for a bucketed method into buffers of the requested size it pads from. Both the
  /// normal and the server path call this. Nothing here is sized by the bound.
  Status bind_inputs(const std::vector<HostInput>& host, const std::string& shapes_text) {
    const MethodMeta& meta = meta_method_->meta();
    std::vector<std::vector<int64_t>> shapes;
    if (!shapes_text.empty()) {
      KILN_ASSIGN_OR_RETURN(shapes, parse_shapes(shapes_text, meta.inputs.size()));
      if (shapes.size() != meta.inputs.size())
        return invalid_argument("--input_shapes gives " + std::to_string(shapes.size()) + " shapes but method '" + meta.name +
                                "' takes " + std::to_string(meta.inputs.size()) + " inputs");
    }
    const std::vector<std::vector<int64_t>> defaults = default_shapes(), bound = meta_method_->bound_shapes();
    std::vector<TensorView> views(host.size());
    for (size_t i = 0; i < host.size(); ++i) {
      const HostInput& h = host[i];
      std::vector<int64_t> shape = !shapes.empty() ? shapes[i] : h.has_own_shape ? h.shape : defaults[i];
      std::string label = "input '" + meta.inputs[i].name + "' (#" + std::to_string(i) + ")";
      if (h.has_own_shape && shape != h.shape)
        return invalid_argument(label + ": --input_shapes asks for " + shape_string(shape) + " but '" + h.source +
                                "' has shape " + shape_string(h.shape) + "; .npy inputs carry their own shape");
      if (shape.size() > static_cast<size_t>(kMaxRank))
        return invalid_argument(label + " has rank " + std::to_string(shape.size()) + ", above the maximum 8");
      views[i].dtype = h.dtype;
      views[i].rank = static_cast<int32_t>(shape.size());
      for (size_t k = 0; k < shape.size(); ++k) views[i].dims[k] = shape[k];
    }
    // Say what runs: the shape, and where the data came from.
    auto say = [&](size_t i, const TensorView& t, const std::string& how) {
      const HostInput& h = host[i];
      std::string from;
      if (h.origin == HostInput::Origin::kOnes) {
        from = !shapes.empty() ? "ones, at --input_shapes"
               : max_shapes_.empty() ? "ones, at the bound: no --input_shapes given"
                                     : "ones, at --max_shapes: no --input_shapes given";
      } else if (h.origin == HostInput::Origin::kImage) {
        from = h.source;
      } else {
        from = "from '" + h.source + "'" + how;
      }
      out_ << "Input " << i << " '" << meta.inputs[i].name << "': " << dtype_name(t.dtype) << " "
           << shape_string(std::vector<int64_t>(t.dims, t.dims + t.rank)) << " (" << from << ")\n";
    };
    if (bucketed_) {  // the bucketed call pads and copies at each run: the views point at buffers of the asked size
      bucket_data_.assign(host.size(), {});
      std::vector<std::string> how(host.size());
      for (size_t i = 0; i < host.size(); ++i) {
        const std::vector<int64_t> shape(views[i].dims, views[i].dims + views[i].rank);
        if (numel(shape) < 0 || std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }))
          return invalid_argument("input '" + meta.inputs[i].name + "' (#" + std::to_string(i) + ") has shape " +
                                  shape_string(shape) + " with a negative size");
        if (host[i].has_own_shape) {  // read in place
          views[i].data = const_cast<uint8_t*>(host[i].bytes.data());
          continue;
        }
        KILN_TRY(allocate(&bucket_data_[i], views[i].nbytes(),
                          "input '" + meta.inputs[i].name + "' (#" + std::to_string(i) + ") at " + shape_string(shape)));
        KILN_TRY(write_input(host[i], i, shape, bound[i], bucket_data_[i].data(), &how[i]));
        views[i].data = bucket_data_[i].data();
      }
      for (size_t i = 0; i < host.size(); ++i)
        out_ << "Input " << i << " '" << meta.inputs[i].name << "': " << dtype_name(views[i].dtype) << " "
             << shape_string(std::vector<int64_t>(views[i].dims, views[i].dims + views[i].rank)) << " (" << host[i].label()
             << how[i] << ", bucketed over '" << bucketed_->dim() << "')\n";
      bucket_views_ = std::move(views);
      return ok_status();
    }
    // The contract first (its message is the one a user can act on), then the bytes, written
    // straight into the arena at the bound-to shape.
    KILN_TRY(method_->bind(views.data(), views.size()));
    for (size_t i = 0; i < host.size(); ++i) {
      const TensorView& dst = method_->input(i);
      std::string how;
      KILN_TRY(write_input(host[i], i, std::vector<int64_t>(dst.dims, dst.dims + dst.rank), bound[i],
                           method_->input_data(i), &how));
      say(i, dst, how);
    }
    return ok_status();
  }

  Status run(const Request& r) {
    std::vector<HostInput> own;
    const std::vector<HostInput>* host = &host_;
    if (!r.inputs.empty()) {
      KILN_TRY(prepare_inputs(r.inputs, &own));
      host = &own;
    }
    KILN_TRY(bind_inputs(*host, r.input_shapes));
    int n = std::max(1, opts_.num_executions);
    std::vector<double> times;
    for (int it = 0; it < n; ++it) {
      if (opts_.profile && it == std::min(1, n - 1)) method_->set_profiling(true);  // the first run warms up
      auto t0 = std::chrono::steady_clock::now();
      KILN_TRY(bucketed_ ? bucketed_->run(bucket_views_.data(), bucket_views_.size()) : method_->execute());
      if (bucketed_ && it == 0) out_ << "Bucket: " << bucketed_->last_bucket() << "\n";
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      times.push_back(ms);
      out_ << "Iteration " << (it + 1) << " of " << n << ": " << std::fixed << std::setprecision(4) << ms << " ms\n";
    }
    if (n > 1) out_ << timing_summary(times);
    out_.unsetf(std::ios::floatfield);
    if (opts_.profile) {
      method_->set_profiling(false);
      const std::vector<ProfileRow> rows = method_->profile();
      out_ << profile_text(rows, method_->delegated()) << thread_text(method_->thread_profile());
      if (!opts_.profile_json.empty()) {
        std::ofstream f(opts_.profile_json);
        f << profile_json(rows).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        if (!f) return io_error("cannot write '" + opts_.profile_json + "'");
      }
    }
    KILN_TRY(write_outputs(r.output_file));
    print_outputs(r.print_output);
    return ok_status();
  }

  Status write_outputs(const std::string& prefix) const {
    if (prefix.empty()) return ok_status();
    for (size_t i = 0; i < num_outputs(); ++i) {
      const TensorView& t = output(i);
      std::vector<int64_t> shape(t.dims, t.dims + t.rank);
      if (opts_.output_format == "npy") {
        KILN_TRY(write_npy(prefix + "-" + std::to_string(i) + ".npy", t.dtype, shape, t.data));
      } else {
        KILN_TRY(write_file(prefix + "-" + std::to_string(i) + ".bin", t.data, t.nbytes()));
      }
    }
    return ok_status();
  }

  static double element(const TensorView& t, int64_t k) {
    switch (t.dtype) {
      case DType::kF32: return t.as<float>()[k];
      case DType::kI64: return static_cast<double>(t.as<int64_t>()[k]);
      case DType::kI32: return t.as<int32_t>()[k];
      case DType::kBool: return static_cast<const uint8_t*>(t.data)[k];
      case DType::kI8: return t.as<int8_t>()[k];
      case DType::kU8: return t.as<uint8_t>()[k];
    }
    return 0;
  }

  void print_outputs(const std::string& mode) const {
    if (mode == "none") return;
    const MethodMeta& meta = meta_method_->meta();
    for (size_t i = 0; i < num_outputs(); ++i) {
      const TensorView& t = output(i);
      std::vector<int64_t> shape(t.dims, t.dims + t.rank);
      int64_t n = t.numel();
      out_ << "Output " << i << " '" << meta.outputs[i].name << "': " << dtype_name(t.dtype) << " " << shape_string(shape);
      if (n > 0) {
        double lo = element(t, 0), hi = lo, sum = 0;
        for (int64_t k = 0; k < n; ++k) {
          double v = element(t, k);
          lo = std::min(lo, v), hi = std::max(hi, v), sum += v;
        }
        out_ << " min " << lo << " max " << hi << " mean " << sum / static_cast<double>(n);
      }
      out_ << "\n";
      int64_t shown = mode == "all" ? n : std::min<int64_t>(n, 8);
      if (shown == 0) continue;
      out_ << "  [";
      for (int64_t k = 0; k < shown; ++k) out_ << (k ? ", " : "") << std::setprecision(7) << element(t, k);
      out_ << (shown < n ? ", ...]\n" : "]\n");
    }
  }

  const std::vector<HostInput>& host() const { return host_; }
  size_t num_outputs() const { return bucketed_ ? bucketed_->num_outputs() : method_->num_outputs(); }
  const TensorView& output(size_t i) const { return bucketed_ ? bucketed_->output(i) : method_->output(i); }

 private:
  const RunnerOptions& opts_;
  std::ostream& out_;
  std::unique_ptr<Program> program_;
  std::unique_ptr<Method> method_;
  std::unique_ptr<BucketedMethod> bucketed_;  // instead of method_, for a bucketed method
  const Method* meta_method_ = nullptr;
  std::vector<TensorView> bucket_views_;      // the inputs of the bucketed call
  std::vector<std::vector<uint8_t>> bucket_data_;  // the bucketed call's inputs at the asked shapes
  std::vector<std::vector<int64_t>> max_shapes_;   // --max_shapes, parsed
  std::vector<HostInput> host_;
};

// A user's text quoted back, cut to 100 bytes (a bad line can be long).
std::string clip(const std::string& s) { return s.size() > 100 ? s.substr(0, 100) + "..." : s; }

Result<Request> parse_request(const std::string& line, const RunnerOptions& defaults) {
  Request r;
  r.output_file = defaults.output_file;
  r.print_output = defaults.print_output;
  std::stringstream ss(line);
  std::string tok;
  while (ss >> tok) {
    auto eq = tok.find('=');
    std::string key = tok.substr(0, eq), val = eq == std::string::npos ? "" : tok.substr(eq + 1);
    if (key == "--input_shapes") {
      r.input_shapes = val;
    } else if (key == "--inputs") {
      std::stringstream fs(val);
      std::string f;
      while (std::getline(fs, f, ',')) r.inputs.push_back(f);
    } else if (key == "--output_file") {
      r.output_file = val;
    } else if (key == "--print_output") {
      if (val != "none" && val != "summary" && val != "all")
        return invalid_argument("--print_output must be none, summary or all, got '" + clip(val) + "'");
      r.print_output = val;
    } else {
      return invalid_argument("unknown request field '" + clip(key) +
                              "'; a request line takes --input_shapes=, --inputs=, --output_file=, --print_output=");
    }
  }
  return r;
}

// Reads one request line of at most kMaxRequestLine bytes into *line (a longer one is consumed
// to its end and reported); false at the end of input. A trailing CR (CRLF input) is dropped.
constexpr size_t kMaxRequestLine = 65536;

bool read_request_line(std::istream& in, std::string* line, size_t* length) {
  line->clear();
  *length = 0;
  int c;
  bool any = false;
  while ((c = in.get()) != EOF) {
    any = true;
    if (c == '\n') break;
    if (++*length <= kMaxRequestLine) line->push_back(static_cast<char>(c));
  }
  if (!line->empty() && line->back() == '\r') line->pop_back(), --*length;
  return any;
}

// A reply is one line: newlines inside a message become spaces, and it is cut at 2000 bytes.
std::string one_line(std::string s) {
  for (char& ch : s)
    if (ch == '\n' || ch == '\r') ch = ' ';
  if (s.size() > 2000) s = s.substr(0, 2000) + "...";
  return s;
}

}  // namespace

int run_runner(const RunnerOptions& opts, std::istream& in, std::ostream& out, std::ostream& err) {
  if (opts.output_format != "bin" && opts.output_format != "npy") {
    err << "error: --output_format must be bin or npy, got '" << opts.output_format << "'\n";
    return 1;
  }
  if (opts.num_executions < 1) {
    err << "error: --num_executions must be at least 1, got " << opts.num_executions << "\n";
    return 1;
  }
  if (opts.print_output != "none" && opts.print_output != "summary" && opts.print_output != "all") {
    err << "error: --print_output must be none, summary or all, got '" << opts.print_output << "'\n";
    return 1;
  }
  if (opts.delegate != "xnnpack" && opts.delegate != "none") {
    err << "error: --delegate must be xnnpack or none, got '" << opts.delegate << "'\n";
    return 1;
  }
  if (opts.cpu_threads < 1 || opts.cpu_threads > 1024) {
    err << "error: --cpu_threads must be between 1 and 1024, got " << opts.cpu_threads << "\n";
    return 1;
  }
  Runner runner(opts, out);
  Status s = runner.init();
  if (!s.ok()) {
    err << "error: " << s.message() << "\n";
    return 1;
  }
  if (!runner.method().delegate_warning().empty()) err << "warning: " << runner.method().delegate_warning() << "\n";
  if (!opts.server_mode) {
    Request r;
    r.input_shapes = opts.input_shapes;
    r.output_file = opts.output_file;
    r.print_output = opts.print_output;
    s = runner.run(r);
    if (!s.ok()) {
      err << "error: " << s.message() << "\n";
      return 1;
    }
    return 0;
  }
  out << "server ready: one request per line (--input_shapes=... --inputs=... --output_file=...), 'quit' to stop\n"
      << std::flush;
  std::string line;
  size_t length = 0;
  int n = 0;
  while (read_request_line(in, &line, &length)) {
    const size_t first = line.find_first_not_of(" \t"), last = line.find_last_not_of(" \t");
    const std::string trimmed = first == std::string::npos ? "" : line.substr(first, last - first + 1);
    if (trimmed == "quit" || trimmed == "exit") break;
    ++n;
    Status st = ok_status();
    if (length > kMaxRequestLine) {
      st = invalid_argument("request line of " + std::to_string(length) + " bytes is longer than the " +
                            std::to_string(kMaxRequestLine) + "-byte limit");
    } else if (trimmed.empty()) {
      st = invalid_argument("empty request; a request line takes --input_shapes=, --inputs=, --output_file=, "
                            "--print_output= ('quit' stops)");
    } else {
      try {  // one bad request never ends the server
        Result<Request> r = parse_request(trimmed, opts);
        st = r.ok() ? runner.run(*r) : r.status();
      } catch (const std::exception& e) {
        st = internal_error(std::string("unexpected exception: ") + e.what());
      } catch (...) {
        st = internal_error("unexpected exception");
      }
    }
    if (st.ok()) {
      out << "request " << n << ": ok\n";
    } else {
      out << "request " << n << ": error: " << one_line(st.message()) << "\n";
    }
    out << std::flush;
  }
  return 0;
}

}  // namespace kiln::tooling
