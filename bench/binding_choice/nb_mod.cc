// nanobind side of bench/binding_choice: one function taking a read-only float32 array.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
namespace nb = nanobind;
NB_MODULE(nb_mod, m) {
  m.def("first", [](nb::ndarray<const float, nb::c_contig, nb::device::cpu> a) { return a.size() ? a.data()[0] : 0.f; });
}
