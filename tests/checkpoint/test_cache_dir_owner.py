"""``sudo -E flightcheck ...``: root with another user's HOME (and XDG_CACHE_HOME) must not
create ``~/.cache/flightcheck`` inside that user's home (docs/security.md "Caches")."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from flightcheck._checkpoint.cachepath import cache_dir


def test_my_own_home_is_used(tmp_path: Path) -> None:
    assert cache_dir({"HOME": str(tmp_path)}) == tmp_path / ".cache" / "flightcheck"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the home to another uid")
def test_another_users_home_is_not_used_as_root(tmp_path: Path) -> None:
    home = tmp_path / "alice"
    home.mkdir()
    os.chown(home, 65534, 65534)
    for env in ({"HOME": str(home), "SUDO_USER": "alice"}, {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".c")}):
        if "XDG_CACHE_HOME" in env:
            (home / ".c").mkdir()
            os.chown(home / ".c", 65534, 65534)
        where = cache_dir(env)
        assert where is None or not str(where).startswith(str(home)), (env, where)
        own = pwd.getpwuid(0).pw_dir
        if os.path.isdir(own) and os.stat(own).st_uid == 0:
            assert where == Path(own) / ".cache" / "flightcheck"
