"""The suite's warnings policy (pyproject.toml): the project's own warnings are errors; a warning
raised inside a third-party library is shown, never fatal."""

from __future__ import annotations

import warnings

import pytest


def _warn(category: type[Warning], module: str) -> None:
    warnings.warn_explicit("a note", category, f"{module}.py", 1, module=module)


@pytest.mark.parametrize("module", ["carrier.memory.sqlite", "clients.discord.client", "tests.x"])
@pytest.mark.parametrize("category", [UserWarning, DeprecationWarning, RuntimeWarning])
def test_warnings_policy_a_warning_raised_in_the_project_fails(
    module: str, category: type[Warning]
) -> None:
    with pytest.raises(category):
        _warn(category, module)


@pytest.mark.parametrize("module", ["litellm.types.utils", "pydantic._internal", "carriers", "x"])
@pytest.mark.parametrize("category", [UserWarning, DeprecationWarning])
def test_warnings_policy_a_library_warning_does_not_fail(
    module: str, category: type[Warning]
) -> None:
    _warn(category, module)  # under the suite's own filters: shown in the summary, no exception
