#pragma once
// The Python exception classes of the kiln package (kiln/_errors.py) as the extension modules
// raise them: kiln/__init__.py hands each module the classes once (set_error_types), and a
// failure is raised as that class with the runtime's message, word for word.
#include <nanobind/nanobind.h>

#include <new>
#include <utility>
#include <string>

#include "kiln/status.h"

namespace kiln::python {

enum class Error { kContract, kProgram, kExport, kExecution, kCount };

// Strong references held for the life of the process (never released: a static destructor
// would run after the interpreter is gone).
inline PyObject*& error_type(Error e) {
  static PyObject* types[static_cast<int>(Error::kCount)] = {};
  return types[static_cast<int>(e)];
}

[[noreturn]] inline void raise(Error e, const std::string& message) {
  PyObject* t = error_type(e);
  PyErr_SetString(t ? t : PyExc_RuntimeError, message.c_str());
  throw nanobind::python_error();
}

/// A failed Status as the exception a Python caller expects: contract refusals (when
/// `contract`) as ContractError, files as ProgramError, unknown names as KeyError, memory as
/// MemoryError, the rest as ExecutionError.
[[noreturn]] inline void raise(const Status& s, bool contract = false) {
  // A NaN/Inf input the delegated path refuses (README "Non-finite values"): not a contract
  // matter, and not a plain ValueError: an ExecutionError with the input and element named.
  // Likewise input data a kernel refuses (a token id out of range): the shapes were admitted.
  if (s.reason() == Reason::kNonFiniteInput || s.reason() == Reason::kDataRefused) raise(Error::kExecution, s.message());
  switch (s.code()) {
    case Code::kInvalidArgument:
    case Code::kOutOfRange:
      if (contract) raise(Error::kContract, s.message());
      throw nanobind::value_error(s.message().c_str());
    case Code::kIoError:
    case Code::kDataLoss: raise(Error::kProgram, s.message());
    case Code::kNotFound: throw nanobind::key_error(s.message().c_str());
    case Code::kResourceExhausted:  // MemoryError, with the runtime's message (what, how much)
      PyErr_SetString(PyExc_MemoryError, s.message().c_str());
      throw nanobind::python_error();
    default: raise(Error::kExecution, s.message());
  }
}

/// Registers set_error_types(contract, program, export_, execution) on module `m`.
inline void def_set_error_types(nanobind::module_& m) {
  m.def("set_error_types", [](nanobind::object contract, nanobind::object program, nanobind::object export_,
                              nanobind::object execution) {
    const std::pair<Error, nanobind::object*> all[] = {
        {Error::kContract, &contract}, {Error::kProgram, &program}, {Error::kExport, &export_}, {Error::kExecution, &execution}};
    for (const auto& [e, o] : all) {
      Py_XDECREF(error_type(e));
      error_type(e) = o->inc_ref().ptr();
    }
  });
}

}  // namespace kiln::python
