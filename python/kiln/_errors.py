"""The kiln package's exceptions. The extension modules raise these (errors.h), each with the
runtime's message word for word."""


class KilnError(Exception):
    """Base of every error kiln raises."""


class ContractError(KilnError, ValueError):
    """Shapes or dtypes outside the program's contract (bind, check, a call)."""


class ProgramError(KilnError, OSError):
    """A .kiln file that cannot be read or loaded (missing, a directory, damaged, a newer format)."""


class ExportError(KilnError, ValueError):
    """Export refused the model or the contract asked of it."""


class ExecutionError(KilnError, RuntimeError):
    """Anything else the runtime refuses while creating or running a method."""


ALL = (ContractError, ProgramError, ExportError, ExecutionError)
