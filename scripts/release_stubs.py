"""Permissive stand-ins for the GPU libraries an old engine release imports on its way to
its argument parser (copied into each release venv by ``scripts/release_venvs.sh``).

A release venv holds the engine's own wheel (``pip install --no-deps``), the real
pure-Python packages its parser's import chain needs, and a CPU torch. What is left are
modules that only matter on a GPU (triton's JIT, xformers, flash-attention, the engine's
compiled ``_C`` extensions): nothing the parser reads. Importing one of the names listed in
``_fc_release_stubs.txt`` beside this file, when no real module of that name is installed,
gives a stub module: any attribute is a class that can be subclassed, called, used as a
decorator (``@triton.jit`` returns the function itself) or as a context manager, and any
submodule is another stub. The finder is consulted last (after every real path), so an
installed module always wins.

Never imported by flightcheck: it runs only inside the release venvs, at interpreter start,
through ``_fc_release_stubs.pth``.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from pathlib import Path
from typing import Any

_LIST = Path(__file__).with_suffix(".txt")


def _passthrough(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``@stub`` on a function or class gives it back unchanged; anything else is None."""
    if len(args) == 1 and not kwargs and (callable(args[0]) or isinstance(args[0], type)):
        return args[0]
    return None


class _Meta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _stub_class(f"{cls.__name__}.{name}")

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        hit = _passthrough(args, kwargs)
        if hit is not None:
            return hit
        return super().__call__()

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __or__(cls, other: Any) -> Any:
        return cls

    __ror__ = __or__


class _Stub(metaclass=_Meta):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _stub_class(name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        hit = _passthrough(args, kwargs)
        return hit if hit is not None else _Stub()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __iter__(self) -> Any:
        return iter(())

    def __bool__(self) -> bool:
        return False


def _stub_class(name: str) -> type:
    return _Meta(name.rsplit(".", 1)[-1], (_Stub,), {"__module__": "_fc_release_stubs"})


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = _stub_class(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _Loader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []  # a package: its submodules are stubs too
        module.__version__ = "0.0.0+flightcheck-stub"  # type: ignore[attr-defined]
        module.__file__ = None
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, roots: frozenset[str]) -> None:
        self.roots = roots

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        root = fullname.split(".", 1)[0]
        if fullname in self.roots or root in self.roots:
            return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)
        return None


def install() -> None:
    """Add the finder for the names listed beside this file (once)."""
    try:
        names = frozenset(w for w in _LIST.read_text().split() if not w.startswith("#"))
    except OSError:
        return
    if names and not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder(names))


install()
