"""Environment variables flightcheck itself sets for the engine's later processes."""

from __future__ import annotations

#: set in the engine's environment once a launch has been checked (by the plugin, or by
#: ``flightcheck run``), so the plugin in the engine's later processes (engine core,
#: workers) does not check it again. Its own module: the plugin imports it on every
#: ``vllm`` command and must stay import-light.
MARKER = "FLIGHTCHECK_PLUGIN_DONE"
