"""What flightcheck knows, as pure tables and rules: GPU archs, CUDA and driver tables,
FlashInfer wheels and JIT rules, units and versions, and one module per engine.

No I/O and no check codes here: checks decide, knowledge only says what is true of a
version, an arch or a flag.
"""
