// pybind11 side of bench/binding_choice: the same function.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
namespace py = pybind11;
PYBIND11_MODULE(pb_mod, m) {
  m.def("first", [](py::array_t<float, py::array::c_style> a) { return a.size() ? a.data()[0] : 0.f; });
}
