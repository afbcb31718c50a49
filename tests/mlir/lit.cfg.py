# lit configuration of ingot's MLIR pass tests (tests/mlir/README.md). ctest's `mlir_passes` test
# passes the tools as parameters: ingot_opt, filecheck, exec_root (scratch directory).
import os

import lit.formats

config.name = "ingot-mlir"
# lit's internal shell: pipes, and `not` (a RUN line that must fail) as a builtin.
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.excludes = ["README.md"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = lit_config.params.get("exec_root", os.path.join(config.test_source_root, "Output"))

for name in ("ingot_opt", "filecheck"):
    if name not in lit_config.params:
        lit_config.fatal(f"pass --param {name}=<path> (ctest's mlir_passes test does)")
# RUN lines name the tools plainly: ingot-opt ... | FileCheck %s.
config.substitutions.append(("ingot-opt", lit_config.params["ingot_opt"]))
config.substitutions.append(("FileCheck", lit_config.params["filecheck"]))
