"""``flightcheck prepare``: build on a build box what a driver-only node would compile or
download at run time (FlashInfer's JIT modules, the official prebuilt wheels), write a
bundle, and install it on the node offline.

Layout: :mod:`.plan` (what the launch reaches and whether this box can build it),
:mod:`.build` (the compile, in a child of the engine's interpreter), :mod:`.wheels` (the
wheelhouse), :mod:`.bundle` (manifest.json), :mod:`.install` (the node side). The checking
process never imports flashinfer or torch: every compile runs in a child with a timeout.
"""
