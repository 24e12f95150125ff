# lit configuration for Stowage: FileCheck tests of the tools' output.
import os
import sys
import lit.formats

config.name = "Stowage"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".test", ".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(os.path.dirname(config.stowage_bin_dir), "test", "lit-out")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py.in", "Inputs", "README.md"]

config.environment["PATH"] = os.pathsep.join(
    [config.stowage_bin_dir, os.path.dirname(config.filecheck), config.environment.get("PATH", "")])
config.substitutions.append(("%models", config.stowage_models_dir))
config.substitutions.append(("%golden", config.stowage_golden_dir))
config.substitutions.append(("%registry", os.path.join(config.stowage_src_root, "planner", "registry")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%python", sys.executable))

# Features: tests that need the shared models say `REQUIRES: models`; lit reports them UNSUPPORTED
# (skipped, with the reason in the summary) where ../shared/models is absent.
if os.path.isfile(os.path.join(config.stowage_models_dir, "stories260K.gguf")):
    config.available_features.add("models")
else:
    lit_config.note("shared models not found at %s: tests that need them are skipped" % config.stowage_models_dir)
if config.have_mlir:
    config.available_features.add("mlir")
if config.have_onednn:
    config.available_features.add("onednn")
if config.have_cuda:
    config.available_features.add("cuda")
# `avx2`: this CPU has AVX2 (the probed CPU device then offers CPU_REPACK, as llama.cpp's does).
try:
    with open("/proc/cpuinfo") as f:
        if any(line.startswith("flags") and " avx2" in line for line in f):
            config.available_features.add("avx2")
except OSError:
    pass
# `chromium`: a headless Chromium to render the SVG of plan-dump --svg and take a screenshot
# (Debian: chromium-headless-shell, or chromium); %chromium runs it headless, without a sandbox (root
# in containers) and without a GPU.
import shutil
_chromium = shutil.which("chromium-headless-shell") or shutil.which("chromium")
if _chromium:
    config.available_features.add("chromium")
    config.substitutions.append(
        ("%chromium", _chromium + " --headless --no-sandbox --disable-gpu --hide-scrollbars"))
else:
    lit_config.note("chromium-headless-shell / chromium not found: the plan-dump --svg screenshot test is "
                    "skipped (apt-get install chromium-headless-shell)")
